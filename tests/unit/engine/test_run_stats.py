"""The array passes of ``engine/run_stats.py`` against the plain passes they stand in for,
bit for bit (``repr`` of every number: a float's sign of zero included): whole stats of
real runs, and each pass on random timelines with ties, reads before writes in finish
order, tensors written by several kernels and kernels that touch nothing."""

from __future__ import annotations

import random
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import onnx
import pytest

import graphexec as gx
from graphexec.engine import run_stats
from graphexec.engine.feeds import default_feeds
from graphexec.engine.metrics import executed_live_peak, scan
from graphexec.engine.result import make_stats
from graphexec.engine.run_stats import StatsPlan
from graphexec.profiling.counters import run_metrics
from graphexec.runtime.profiles import load_profile

LIGHT = sorted((Path(onnx.__file__).parent / "backend" / "test" / "data" / "light").glob("*.onnx"))
SOME = [p for p in LIGHT if p.stem in ("light_bvlc_alexnet", "light_inception_v1", "light_shufflenet")]
CONFIGS = [{"streams": 4}, {"streams": 1}, {"streams": 2, "launch": "host"}, {"streams": 3, "device": "ascend310p"},
           {"streams": 4, "check_hazards": True}]


def _both(compiled, monkeypatch):
    """make_stats of the run just finished, by the array passes (any size) and the plain ones."""
    monkeypatch.setattr(run_stats, "MIN_TASKS", 0)
    fast = make_stats(compiled, compiled.device)
    plan, compiled.stats_plan = compiled.stats_plan, None
    try:
        plain = make_stats(compiled, compiled.device)
    finally:
        compiled.stats_plan = plan
    return fast, plain


@pytest.mark.parametrize("path", SOME, ids=[p.stem[6:] for p in SOME])
@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()))
def test_stats_of_real_runs_are_the_plain_passes(path, config, monkeypatch):
    graph = gx.load(path)
    feeds = default_feeds(graph)
    session = gx.Session(graph, **config)
    compiled = session.compile(feeds)
    result = session.simulate(feeds) if not config.get("check_hazards") else session.run(feeds)
    assert compiled.stats_plan is not None
    fast, plain = _both(compiled, monkeypatch)
    assert repr(fast) == repr(plain)
    assert repr(result.stats) == repr(plain) or config.get("check_hazards")   # hazards: extra holds the list
    assert fast.num_tasks >= 15 and fast.lower_bound_bytes > 0 and fast.mean_queue_depth > 0   # alexnet fused: 16


def test_a_plan_with_control_flow_keeps_the_plain_passes():
    """Its bodies' kernels run beside its own: the plain passes measure such a run."""
    from tests.unit.engine.test_simulate import _if_model

    session = gx.Session(_if_model())
    x = {"x": np.arange(4, dtype=np.float32)}
    compiled = session.compile(x)
    assert compiled.controls and compiled.stats_plan is None
    assert session.run(x).stats.num_kernels > len(compiled._kernels) - 1   # the branch's own kernels count


def test_a_run_that_is_not_the_plans_kernels_each_once_is_refused():
    graph = gx.load(SOME[1])
    session = gx.Session(graph, streams=2)
    compiled = session.compile(default_feeds(graph))
    tasks = session.simulate(default_feeds(graph)).run.tasks
    kernels = [t for t in tasks if t.kind == "kernel"]
    assert compiled.stats_plan.order(kernels) is not None
    assert compiled.stats_plan.order(kernels[:-1]) is None
    assert compiled.stats_plan.order(kernels[:-1] + kernels[:1]) is None
    stranger = SimpleNamespace(kind="kernel", meta={}, start_t=0.0, end_t=1.0)
    assert compiled.stats_plan.order(kernels[:-1] + [stranger]) is None


def _random_plan(rng):
    """Kernels over a few tensors (some aliases of others), random units, costs and times."""
    names = [f"t{i}" for i in range(rng.randrange(0, 8))]
    alias = {f"a{i}": rng.choice(names) for i in range(rng.randrange(0, 3))} if names else {}
    sizes = {n: rng.choice([0, 1, 7, 64, 1 << 40]) for n in names if rng.random() < 0.8}
    everything = names + list(alias) + ["in", "w"]
    kernels = []
    for i in range(rng.randrange(0, 14)):
        kernels.append(SimpleNamespace(
            id=100 + i, unit=rng.choice(["cube", "vector", "aicpu"]), dtype=rng.choice(["float16", "float32"]),
            flops=rng.choice([0.0, 1.0, 3e9, 1e-3 * rng.random()]), bytes=rng.choice([0.0, 12.0, 1e6 * rng.random()]),
            writes=tuple(rng.sample(everything, min(len(everything), rng.randrange(0, 3)))),
            reads=tuple(rng.sample(everything, min(len(everything), rng.randrange(0, 4))))))
    return kernels, sizes, (lambda n: alias.get(n, n))


def _random_run(rng, kernels, others=("record", "wait", "memcpy", "control")):
    """The kernels' DeviceTask stand-ins in a random finish order, times with ties, plus
    tasks of the ``others`` kinds (records, waits, copies, switches)."""
    done = []
    for k in kernels:
        start = float(rng.randrange(6)) / 2
        done.append(SimpleNamespace(kind="kernel", unit=k.unit, dtype=k.dtype, flops=k.flops, bytes=k.bytes,
                                    meta={"task": k}, enqueue_t=start - rng.randrange(3), start_t=start,
                                    end_t=start + rng.choice([0.0, 0.5, 1.0, 2.5]), seq=len(done)))
    for _ in range(rng.randrange(0, 5)):
        start = float(rng.randrange(8)) / 2
        kind = rng.choice(others)
        nbytes = float(rng.randrange(3)) if kind == "memcpy" else 0.0   # a copy's bytes; an event task has none
        done.append(SimpleNamespace(kind=kind, unit="", dtype="", flops=0.0, bytes=nbytes, meta={},
                                    enqueue_t=start - rng.randrange(2), start_t=start,
                                    end_t=start + rng.choice([0.0, 1.0]), seq=len(done)))
    rng.shuffle(done)
    return done


@pytest.mark.parametrize("seed", range(4))
def test_each_pass_on_random_timelines_is_the_plain_pass(seed):
    rng = random.Random(seed)
    profile = load_profile("ascend910")
    for _ in range(150):
        kernels, sizes, root = _random_plan(rng)
        plan = StatsPlan(kernels, {k.id: i for i, k in enumerate(kernels)}, sizes, root, profile)
        done = _random_run(rng, kernels)
        ran = [t for t in done if t.kind == "kernel"]
        ks = plan.order(ran)
        assert ks is not None
        start = np.array([t.start_t for t in ran], dtype=np.float64)
        end = np.array([t.end_t for t in ran], dtype=np.float64)
        seen = scan(done, profile)
        assert run_stats.window(done, start, end) == (seen["lo"], seen["hi"])
        span = seen["hi"] - seen["lo"] if seen["hi"] >= seen["lo"] else 0.0
        assert repr(plan.utilization(ks, profile, span)) == repr(seen["utilization"])
        assert plan.live_peak(ks, start, end) == executed_live_peak(done, sizes, root)
        assert repr(run_stats.run_metrics(done, start, end)) == repr(run_metrics(done))
