"""The timing-only run's fast paths against the plain paths they replace, bit for bit:
the tape recorded in a dict's keys against ``KernelCall.start``/``end`` appending to a
list, the launch loop's kernel shortcut against the dispatch table, the executed live
peak read from the alias table against ``TaskGraph.root`` per name, the cached
``needs_values`` and the dtype-keyed ``signature``."""

from __future__ import annotations

import copy
import random
from pathlib import Path

import numpy as np
import onnx
import pytest

import graphexec as gx
from graphexec.engine.feeds import default_feeds, signature
from graphexec.engine.metrics import executed_live_peak, scan, utilization
from graphexec.engine.replay import shallow_copy
from graphexec.engine.result import make_stats
from graphexec.ir import TensorType
from graphexec.plan import TaskGraph
from graphexec.runtime import launch
from graphexec.runtime.launch import launch_all

LIGHT = sorted((Path(onnx.__file__).parent / "backend" / "test" / "data" / "light").glob("*.onnx"))
SOME = [p for p in LIGHT if p.stem in ("light_inception_v1", "light_shufflenet", "light_squeezenet")]


def _plain_run(compiled, feeds):
    """``Compiled._run``'s simulation the plain way: KernelCalls append the tape's steps to
    a list (``ctx.log`` None), as every run did before the dict log."""
    dev = compiled.device
    dev.reset_run()
    ctx = compiled.bind(compute=False)
    ctx.calls = {}
    for name, value in feeds.items():
        compiled._feed(ctx, name, value, False)
    assert ctx.log is None
    launch_all(ctx, compiled.schedule.order)
    dev.synchronize_device()
    for name in compiled.graph.outputs:
        compiled._fetch(ctx, name, False)
    return list(ctx.tape), make_stats(compiled, dev), [(t.name, t.start_t, t.end_t) for t in dev.sim.finished]


@pytest.mark.parametrize("path", SOME, ids=[p.stem[6:] for p in SOME])
@pytest.mark.parametrize("streams", [1, 4])
def test_the_dict_tape_is_the_kernel_calls_tape(path, streams):
    graph = gx.load(path)
    feeds = default_feeds(graph)
    session = gx.Session(graph, streams=streams)
    compiled = session.compile(feeds)
    fast = session.simulate(feeds)
    recorded = compiled._tape
    tape, stats, finished = _plain_run(session.compile(feeds), feeds)   # the same plan, simulated again
    assert recorded.steps == tape and len(tape) == 2 * len(compiled._kernels)
    assert fast.stats == stats
    assert [(t.name, t.start_t, t.end_t) for t in fast.run.tasks] == finished
    # a full run of the plan replays that tape: its outputs are a fresh session's full run's
    again = session.run(feeds)
    alone = gx.Session(graph, streams=streams).run(feeds)
    for name in graph.outputs:
        np.testing.assert_array_equal(again.outputs[name], alone.outputs[name])


def test_a_timing_only_run_leaves_no_kernel_calls():
    """No KernelCall (each held the run's context, a cycle that kept the whole session
    alive until a full collection); a full run makes them when it replays."""
    graph = gx.load(SOME[-1])
    feeds = default_feeds(graph)
    session = gx.Session(graph, streams=4)
    compiled = session.compile(feeds)
    session.simulate(feeds)
    assert compiled._calls == {}
    session.run(feeds)   # the kernels a replay step does not call directly (``engine/steps.py``)
    plain = {t.id for t, runner in zip(compiled._kernels, compiled._steps.runners) if runner is None}
    assert plain and plain <= set(compiled._calls) <= {t.id for t in compiled._kernels}


def test_the_launch_loop_shortcut_matches_the_dispatch_table(monkeypatch):
    graph = gx.load(SOME[0])
    feeds = default_feeds(graph)
    session = gx.Session(graph, streams=4)
    compiled = session.compile(feeds)
    fast = _plain_run(compiled, feeds)
    seen = []

    def counted(ctx, task):   # a table entry of its own: the loop must go through the table
        seen.append(task.id)
        launch._kernel(ctx, task)

    monkeypatch.setitem(launch.HANDLERS, launch.TaskKind.KERNEL, counted)
    plain = _plain_run(compiled, feeds)
    assert seen and plain == fast


def _live_peak_plain(done, sizes, root):
    """The executed live peak as first written: root() per name, min/max, sorted with names."""
    first, last = {}, {}
    for t in done:
        task = t.meta.get("task") if t.kind == "kernel" else None
        if task is None:
            continue
        for name in map(root, task.writes):
            if name in sizes:
                first[name] = min(first.get(name, t.start_t), t.start_t)
                last[name] = max(last.get(name, t.end_t), t.end_t)
        for name in map(root, task.reads):
            if name in last and t.end_t > last[name]:
                last[name] = t.end_t
    live = peak = 0
    for _, kind, name in sorted([(s, 1, n) for n, s in first.items()] + [(e, 0, n) for n, e in last.items()]):
        live += sizes[name] if kind else -sizes[name]
        peak = max(peak, live)
    return peak


@pytest.mark.parametrize("path", SOME, ids=[p.stem[6:] for p in SOME])
def test_executed_live_peak_matches_the_plain_sweep(path):
    session = gx.Session(gx.load(path), streams=4)
    result = session.simulate()
    compiled = session.compiled
    sizes = result.run.activation_sizes()
    done = [t for t in result.run.tasks if t.start_t is not None]
    assert compiled.tasks.flat
    want = _live_peak_plain(done, sizes, compiled.tasks.root)
    assert executed_live_peak(done, sizes, compiled.tasks.root) == want == result.stats.lower_bound_bytes
    assert executed_live_peak(done, sizes, lambda n: compiled.tasks.root(n)) == want   # any callable


class _Run:
    def __init__(self, kind, start, end, task):
        self.kind, self.start_t, self.end_t, self.meta = kind, start, end, {"task": task}


class _Task:
    def __init__(self, reads, writes):
        self.reads, self.writes = reads, writes


def test_executed_live_peak_on_random_timelines_ties_and_chained_aliases():
    rng = random.Random(7)
    for trial in range(200):
        names = [f"v{i}" for i in range(8)]
        alias = {f"a{i}": rng.choice(names) for i in range(4)}
        if trial % 2:   # a chain: not flat, root() must follow it
            alias["b0"] = "a0"
        graph = TaskGraph([], {}, alias)
        sizes = {n: rng.randrange(1, 50) for n in names + list(alias) if rng.random() < 0.7}   # aliases too
        pool = names + list(alias)
        done = []
        for _ in range(rng.randrange(1, 12)):
            s = float(rng.randrange(6))   # few distinct times: many ties
            done.append(_Run(rng.choice(["kernel", "kernel", "memcpy"]), s, s + rng.randrange(3),
                             _Task(tuple(rng.sample(pool, 2)), tuple(rng.sample(pool, rng.randrange(1, 3))))))
        assert graph.flat == (trial % 2 == 0)
        assert executed_live_peak(done, sizes, graph.root) == _live_peak_plain(done, sizes, graph.root)


def test_needs_values_is_worked_out_once_and_stays_right():
    session = gx.Session(gx.load(SOME[-1]), streams=2)
    compiled = session.compile(None)
    assert compiled.needs_values is None and compiled.needs_values is None
    assert compiled._needs is None


def test_signature_keys_by_dtype_exactly():
    f32, f32_big = np.dtype("float32"), np.dtype(">f4")
    same = signature({"x": TensorType(f32, (2, 3))}), signature({"x": TensorType(np.dtype(np.float32), (2, 3))})
    assert same[0] == same[1] and hash(same[0]) == hash(same[1])
    assert signature({"x": TensorType(f32, (2, 3))}) != signature({"x": TensorType(f32_big, (2, 3))})
    assert signature({"x": TensorType(f32, (2, 3))}) != signature({"x": TensorType(np.dtype("float64"), (2, 3))})
    two = {"b": TensorType(f32, (1,)), "a": TensorType(np.dtype("int64"), (1,))}
    assert [k[0] for k in signature(two)] == ["a", "b"]


def _window_plain(done):
    work = [t for t in done if t.kind in ("kernel", "memcpy", "control")]
    return (max(t.end_t for t in work) - min(t.start_t for t in work)) if work else 0.0


class _Done:
    def __init__(self, kind, unit, dtype, start, end, flops, nbytes):
        self.kind, self.unit, self.dtype, self.start_t, self.end_t = kind, unit, dtype, start, end
        self.flops, self.bytes = flops, nbytes


@pytest.mark.parametrize("path", SOME, ids=[p.stem[6:] for p in SOME])
def test_the_one_pass_scan_matches_the_separate_passes(path):
    session = gx.Session(gx.load(path), streams=4)
    result = session.simulate()
    done = [t for t in result.run.tasks if t.start_t is not None]
    profile = session.compiled.profile
    seen = scan(done, profile)
    makespan = _window_plain(done)
    assert seen["hi"] - seen["lo"] == makespan == result.stats.makespan_us
    assert seen["utilization"] == utilization(done, profile, makespan)
    kernels = [t for t in done if t.kind == "kernel"]
    assert seen["num_kernels"] == sum(t.unit != "aicpu" for t in kernels) == result.stats.num_kernels
    assert seen["num_aicpu"] == sum(t.unit == "aicpu" for t in kernels)


def test_the_scan_on_random_task_lists():
    rng = random.Random(11)
    profile = gx.Session(gx.load(SOME[-1])).profile
    for _ in range(300):
        done = []
        for _ in range(rng.randrange(0, 10)):
            start = rng.random() * 10
            done.append(_Done(rng.choice(["kernel", "kernel", "memcpy", "control", "record", "wait"]),
                              rng.choice(["cube", "vector", "aicpu"]), rng.choice(["float16", "float32"]),
                              start, start + rng.choice([0.0, rng.random()]), rng.random() * 1e6, rng.random() * 1e5))
        seen = scan(done, profile)
        makespan = _window_plain(done)
        assert (seen["hi"] - seen["lo"] if seen["hi"] >= seen["lo"] else 0.0) == makespan
        assert seen["utilization"] == utilization(done, profile, makespan)


class _Slots:
    __slots__ = ("a",)

    def __init__(self):
        self.a = [1]


class _Hooked:
    def __init__(self):
        self.a = [1]

    def __copy__(self):
        return "hooked"


def test_shallow_copy_is_copy_copy():
    session = gx.Session(gx.load(SOME[-1]), streams=4)
    session.simulate()
    sim = session.compiled.device.sim
    fast, plain = shallow_copy(sim), copy.copy(sim)
    assert type(fast) is type(plain) is type(sim) and fast is not sim
    assert vars(fast) == vars(plain) and all(vars(fast)[k] is v for k, v in vars(sim).items())
    slotted = _Slots()
    assert shallow_copy(slotted).a is slotted.a and type(shallow_copy(slotted)) is _Slots   # copy.copy's way
    assert shallow_copy(_Hooked()) == "hooked"
    assert shallow_copy({"a": 1}) == {"a": 1}
