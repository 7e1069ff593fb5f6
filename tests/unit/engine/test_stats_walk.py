"""``StatsPlan.walk`` (make_stats' one walk over a small run's tasks) against the plain
passes it stands in for, bit for bit (``repr``: a float's sign of zero included): whole
stats of real runs, each number on random timelines with ties, tensors written by several
kernels and reads before writes in finish order, and the runs it must refuse."""

from __future__ import annotations

import random
from types import SimpleNamespace

import pytest
from test_run_stats import _random_run

import graphexec as gx
from graphexec.engine import run_stats
from graphexec.engine.feeds import default_feeds
from graphexec.engine.metrics import executed_live_peak, scan
from graphexec.engine.result import make_stats
from graphexec.engine.run_stats import StatsPlan
from graphexec.profiling.counters import run_metrics
from graphexec.runtime.profiles import load_profile
from tests.unit.engine.test_run_stats import LIGHT, _random_plan

CONFIGS = [{"streams": 4}, {"streams": 1}, {"streams": 2, "launch": "host"}, {"streams": 3, "device": "ascend310p"}]


def _plain(compiled):
    """make_stats of the run just finished by the plain passes alone."""
    plan, compiled.stats_plan = compiled.stats_plan, None
    try:
        return make_stats(compiled, compiled.device)
    finally:
        compiled.stats_plan = plan


@pytest.mark.parametrize("path", LIGHT, ids=[p.stem[6:] for p in LIGHT])
def test_stats_of_real_runs_are_the_plain_passes_and_the_array_passes(path, monkeypatch):
    monkeypatch.setattr(run_stats, "WALK_MAX", 1 << 30)   # every size, the large ones too
    graph = gx.load(path)
    feeds = default_feeds(graph)
    for config in CONFIGS:
        session = gx.Session(graph, **config)
        compiled = session.compile(feeds)
        result = session.simulate(feeds)
        assert compiled.stats_plan.walk(compiled.device.sim.finished, compiled.profile) is not None
        walked = make_stats(compiled, compiled.device)
        with monkeypatch.context() as m:   # the array passes, which runs walk takes no longer reach
            m.setattr(run_stats, "WALK_MAX", -1)
            m.setattr(run_stats, "MIN_TASKS", 0)
            arrays = make_stats(compiled, compiled.device)
        assert repr(walked) == repr(arrays) == repr(_plain(compiled)) == repr(result.stats)


def _expected(done, profile, sizes, root):
    seen = scan(done, profile)
    span = seen["hi"] - seen["lo"] if seen["hi"] >= seen["lo"] else 0.0
    return (span, (seen["num_kernels"], seen["num_aicpu"]), seen["utilization"],
            executed_live_peak(done, sizes, root), run_metrics(done))


@pytest.mark.parametrize("seed", range(4))
def test_each_number_on_random_timelines_is_the_plain_passes(seed):
    rng = random.Random(seed)
    profile = load_profile("ascend910")
    for _ in range(150):
        kernels, sizes, root = _random_plan(rng)
        plan = StatsPlan(kernels, {k.id: i for i, k in enumerate(kernels)}, sizes, root, profile)
        done = _random_run(rng, kernels, ("record", "wait"))
        got = plan.walk(done, profile)
        assert got is not None
        assert repr(got) == repr(_expected(done, profile, sizes, root))


def test_runs_that_are_not_the_plans_kernels_and_events_are_refused():
    rng = random.Random(7)
    profile = load_profile("ascend910")
    kernels, sizes, root = _random_plan(rng)
    while len(kernels) < 3:
        kernels, sizes, root = _random_plan(rng)
    plan = StatsPlan(kernels, {k.id: i for i, k in enumerate(kernels)}, sizes, root, profile)
    done = _random_run(rng, kernels, ("record", "wait"))
    ran = [t for t in done if t.kind == "kernel"]
    assert plan.walk(done, profile) is not None
    assert plan.walk([t for t in done if t is not ran[0]], profile) is None          # a kernel missing
    assert plan.walk(done + [ran[0]], profile) is None                               # one twice
    twin = SimpleNamespace(**{**vars(ran[0]), "meta": {"task": SimpleNamespace(**vars(kernels[0]))}})
    assert plan.walk([twin if t is ran[0] else t for t in done], profile) is None    # an equal task, not the plan's
    for kind in ("memcpy", "control", "callback"):
        extra = SimpleNamespace(**{**vars(ran[0]), "kind": kind, "meta": {}})
        assert plan.walk(done + [extra], profile) is None
    unstarted = SimpleNamespace(**{**vars(ran[0]), "kind": "record", "meta": {}, "start_t": None})
    assert plan.walk(done + [unstarted], profile) is None


def test_a_run_with_a_copy_on_a_stream_gets_the_plain_numbers(monkeypatch):
    """A task walk refuses sends make_stats to the passes: the numbers are theirs."""
    graph = gx.load(LIGHT[0])
    feeds = default_feeds(graph)
    session = gx.Session(graph, streams=2)
    compiled = session.compile(feeds)
    before = session.simulate(feeds).stats
    finished = compiled.device.sim.finished
    last = finished[-1]
    copy = SimpleNamespace(kind="memcpy", unit="copy", dtype="", flops=0.0, bytes=64.0, meta={}, seq=10 ** 6,
                           enqueue_t=last.end_t, start_t=last.end_t, end_t=last.end_t + 3.0)
    finished.append(copy)
    assert compiled.stats_plan.walk(finished, compiled.profile) is None
    stats = make_stats(compiled, compiled.device)
    assert repr(stats) == repr(_plain(compiled))
    assert stats.num_tasks == before.num_tasks + 1
    assert stats.makespan_us > before.makespan_us   # the copy ends last
