"""The compiled event loop (``_simcore.c`` through ``runtime/sim_core.py``) against the
Python loop, bit for bit: random graph-mode task lists (streams of several priorities,
kernels of every unit with waves and shared HBM, records and waits on reused event ids)
on each built-in profile, and whole plans through ``Session``. The Python loop is itself
checked against the frozen plain simulator (``test_sim_fast.py``, ``test_sim_loop.py``).
"""

from __future__ import annotations

import dataclasses
import shutil
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from test_sim_fast import PLAIN, _seen

import graphexec as gx
from graphexec.runtime import sim_core
from graphexec.runtime.device import Device
from graphexec.runtime.profiles import load_profile
from graphexec.runtime.sim import DeviceTask
from graphexec.runtime.sim_core import KERNEL, RECORD, WAIT, GraphTasks, run_graph

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
needs_core = pytest.mark.skipif(sim_core._simcore is None, reason="graphexec.runtime._simcore is not built")


def test_the_core_is_built_where_a_compiler_is():
    """An install on a machine with a C compiler builds it (setup.py); without one the
    Python loop runs everything (the extension is optional)."""
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler on this machine")
    assert sim_core._simcore is not None and sim_core.CORE


def _entries(rng: np.random.Generator, n_streams: int, n: int) -> list[tuple]:
    """A random launch order: kernels (a few blocks, or many waves; no bytes, or HBM-bound),
    records and waits on a few reused event ids, each wait after a record of its event."""
    out: list[tuple] = []
    recorded: set[int] = set()
    for _ in range(n):
        s = int(rng.integers(n_streams))
        r = rng.random()
        if r < 0.15:
            ev = int(rng.integers(3))
            out.append((RECORD, s, "", "", 1, 0.0, 0.0, "float16", {"i": len(out)}, ev))
            recorded.add(ev)
        elif r < 0.3 and recorded:
            ev = int(rng.choice(sorted(recorded)))
            out.append((WAIT, s, "", "", 1, 0.0, 0.0, "float16", {"i": len(out)}, ev))
        else:
            blocks = int(rng.choice([1, 2, 4, 8, 32, 40, 100, 700]))
            nbytes = 0.0 if rng.random() < 0.25 else float(10 ** rng.uniform(2, 8))
            unit = ("vector", "cube", "aicpu")[int(rng.choice(3, p=[0.55, 0.4, 0.05]))]
            dtype = ("float16", "float32", "int8")[int(rng.integers(3))]
            flops = float(10 ** rng.uniform(2, 9)) if rng.random() < 0.9 else int(rng.integers(1, 10**6))
            out.append((KERNEL, s, f"k{len(out)}", unit, blocks, flops, nbytes, dtype, {"i": len(out)}, -1))
    return out


def _device(profile: Any, priorities: list[int]) -> tuple[Device, list, dict]:
    dev = Device(profile, graph_mode=True)
    streams = [dev.default_stream] + [dev.create_stream(priority=p) for p in priorities[1:]]
    events = {i: dev.create_event() for i in range(3)}
    return dev, streams, events


def _python(profile: Any, priorities: list[int], entries: list[tuple]) -> tuple:
    """The entries launched one by one in graph mode (``launch_all``'s calls), synchronized."""
    dev, streams, events = _device(profile, priorities)
    log: dict[int, Any] = {}
    k = 0
    for kind, s, name, unit, block_dim, flops, nbytes, dtype, meta, ev in entries:
        if kind == KERNEL:
            dev.launch(DeviceTask("kernel", streams[s], name, unit, block_dim, flops, nbytes, dtype, "d2d", None,
                                  partial(log.setdefault, k, ~k), log.setdefault, meta))
            k += 1
        elif kind == RECORD:
            dev.record_event(events[ev], streams[s]).meta.update(task=meta)
        else:
            dev.stream_wait_event(streams[s], events[ev]).meta.update(task=meta)
    dev.synchronize_device()
    return _everything(dev, streams, events), list(log)


def _core(profile: Any, priorities: list[int], entries: list[tuple]) -> tuple:
    dev, streams, events = _device(profile, priorities)
    steps = run_graph(dev, streams, events, GraphTasks(entries))
    assert steps is not None
    return _everything(dev, streams, events), steps


def _everything(dev: Device, streams: list, events: dict) -> tuple:
    """All the run left, as exact values (``_seen`` plus each task's own fields)."""
    tasks = [(t.kind, t.name, t.unit, t.block_dim, t.seq, t.enqueue_t, t.start_t, t.end_t, t.ready_t, t.max_cores,
              t.block_us, t.block_bytes, t.pool, t.blocks_left, t.blocks_running, t.result, t.start_fn, t.end_fn,
              dict(t.meta), t.event.record_task.seq if t.kind == "wait" else None) for t in dev.sim.finished]
    launches = [(h.task.seq, h.start, h.end) for h in dev.launches]
    cores = dev.sim.cores
    return (_seen(dev), tasks, launches, repr(dev.sim._seq), cores.t, cores.next_t, cores.stale, dict(cores.free),
            [(s.last_end, s.pending, s.active, len(s.queue)) for s in streams],
            [e.record_task.seq if e.record_task is not None else None for e in events.values()], dev.sim.queued)


@needs_core
@pytest.mark.parametrize("seed", range(80))
def test_random_task_lists_match_the_python_loop(seed):
    rng = np.random.default_rng(seed)
    profile = load_profile(("ascend910", "ascend910b", "ascend310p")[seed % 3])
    n_streams = int(rng.integers(1, 6))
    priorities = [int(rng.integers(0, 3)) for _ in range(n_streams)]
    entries = _entries(rng, n_streams, int(rng.integers(1, 120)))
    assert _core(profile, priorities, entries) == _python(profile, priorities, entries)


@needs_core
def test_hbm_shared_by_many_kernels_at_once():
    """Eight streams of HBM-bound kernels with equal and unequal demands: the water-filling
    (with its stable sort on ties) decides every rate."""
    entries = []
    for i in range(64):
        nbytes = 1e7 if i % 3 else 3e6
        entries.append((KERNEL, i % 8, f"k{i}", "vector", 8, 1e5, nbytes, "float16", {}, -1))
    profile = load_profile("ascend910b")
    assert _core(profile, [0] * 8, entries) == _python(profile, [0] * 8, entries)


@needs_core
def test_a_zero_rate_leaves_the_run_to_the_python_loop():
    """HBM of no bandwidth: Python divides by zero mid-run; the C loop stops, changes
    nothing, and the caller's Python launch raises as it always did."""
    profile = PLAIN.model_copy(update={"hbm_bandwidth_gbps": 1e-300})
    entries = [(KERNEL, 0, "k", "vector", 2, 1e6, 1e300, "float16", {}, -1)]
    dev, streams, events = _device(profile, [0])
    before = _everything(dev, streams, events)
    assert run_graph(dev, streams, events, GraphTasks(entries)) is None
    assert _everything(dev, streams, events) == before
    with pytest.raises(ZeroDivisionError):
        _python(profile, [0], entries)


@needs_core
def test_what_the_core_does_not_run():
    """Not graph mode, a stream with a core cap, a busy device, a wait with no record
    before it, or the switch off: None, and the device is untouched."""
    profile = PLAIN
    k = (KERNEL, 0, "k", "vector", 2, 1e6, 1e3, "float16", {}, -1)
    dev, streams, events = _device(profile, [0])
    dev.graph_mode = False
    assert run_graph(dev, streams, events, GraphTasks([k])) is None
    dev, streams, events = _device(profile, [0])
    streams[0].core_limit = {"vector": 1}
    assert run_graph(dev, streams, events, GraphTasks([k])) is None
    dev, streams, events = _device(profile, [0])
    dev.launch(DeviceTask("kernel", streams[0], "busy", "vector", 1, 1e6))
    assert run_graph(dev, streams, events, GraphTasks([k])) is None
    dev, streams, events = _device(profile, [0])
    assert run_graph(dev, streams, events, GraphTasks([(WAIT, 0, "", "", 1, 0.0, 0.0, "float16", {}, 0)])) is None
    assert run_graph(dev, streams, events, GraphTasks([])) is None
    assert dev.sim.finished == [] and dev.launches == []


@pytest.mark.parametrize("streams", [1, 4, "auto"])
def test_sessions_match_with_the_core_off(monkeypatch, streams):
    """Whole plans: timing-only and full runs (the first simulates, later ones replay)
    give the same stats, timeline, launches and outputs with the C loop and without."""
    for name in ("light_squeezenet", "light_shufflenet", "light_inception_v1"):
        path = LIGHT / f"{name}.onnx"
        graph = gx.load(path)
        feeds = gx.default_feeds(graph)
        seen = []
        for core in (False, True):
            monkeypatch.setattr(sim_core, "CORE", core)
            session = gx.Session(graph, streams=streams)
            runs = [session.simulate(feeds), session.simulate(feeds), session.run(feeds)]
            seen.append([(repr(dataclasses.replace(r.stats, compile_s=0.0)), r.run.sim.samples,
                          [(t.name, t.seq, t.start_t, t.end_t, t.max_cores) for t in r.run.tasks],
                          [(h.start, h.end) for h in r.run.launches],
                          {k: v.tobytes() for k, v in r.outputs.items()}) for r in runs])
        assert seen[0] == seen[1], path


@needs_core
@pytest.mark.parametrize("profile", ["ascend910", "ascend910b", "ascend310p"])
def test_what_if_times_match_the_python_loop(monkeypatch, profile):
    """``simulate_times`` (the ``auto`` search, joint memory planning, the diagnosis'
    experiments) takes its times from the C loop: the same makespan and the same times,
    in the same (finish) order."""
    from graphexec.runtime.launch import simulate_times

    for name in ("light_squeezenet", "light_inception_v1"):
        schedule = gx.Session(gx.load(LIGHT / f"{name}.onnx"), streams=4).compile().schedule
        seen = []
        for core in (False, True):
            monkeypatch.setattr(sim_core, "CORE", core)
            span, times = simulate_times(schedule, load_profile(profile))
            seen.append((span, list(times.items())))
        assert seen[0] == seen[1]


@needs_core
def test_bad_columns_are_refused_not_run():
    """A kernel with no block (the C loop's cohorts would overrun) or a stream out of range:
    a ValueError naming the task, before anything runs."""
    for bad in ((KERNEL, 0, "k", "vector", 0, 1e6, 1e3, "float16", {}, -1),
                (KERNEL, 3, "k", "vector", 1, 1e6, 1e3, "float16", {}, -1)):
        tasks = GraphTasks([bad])
        dev, streams, events = _device(PLAIN, [0])
        if bad[4] == 0:
            costs = tasks.costs(dev.sim)
            assert costs is not None
            costs[7][0] = 0   # the block counts the costs give: at least one block each
        with pytest.raises(ValueError, match="task 0"):
            run_graph(dev, streams, events, tasks)


@needs_core
def test_a_signal_stops_a_long_run_and_changes_nothing():
    """The C loop looks for signals every 65,536 steps: Ctrl-C (here an alarm's exception)
    stops a long run as it stops the Python loop, and the device is as it was."""
    import signal

    class Alarm(Exception):
        pass

    def ring(*_: Any) -> None:
        raise Alarm

    entries = [(KERNEL, 0, f"k{i}", "vector", 65535, 1e3, 0.0, "float16", {}, -1) for i in range(4000)]
    dev, streams, events = _device(PLAIN, [0])
    before = _everything(dev, streams, events)
    old = signal.signal(signal.SIGALRM, ring)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.05)
        with pytest.raises(Alarm):
            run_graph(dev, streams, events, GraphTasks(entries))
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert _everything(dev, streams, events) == before


@needs_core
def test_a_replaced_kernel_handler_is_called(monkeypatch):
    """A dispatch table whose kernel entry was replaced (as tests do) is honoured: the run
    launches through it and the Python loop, not the compiled one."""
    from graphexec.plan import TaskKind
    from graphexec.runtime import launch

    seen = []
    plain = launch.HANDLERS[TaskKind.KERNEL]
    monkeypatch.setitem(launch.HANDLERS, TaskKind.KERNEL, lambda ctx, task: (seen.append(task.id), plain(ctx, task)))
    session = gx.Session(gx.load(LIGHT / "light_squeezenet.onnx"), streams=2, policy="list")   # no search's runs
    result = session.simulate()
    assert len(seen) == result.stats.num_kernels > 0
