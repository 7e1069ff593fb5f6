"""The graph-mode launch loop (``Device.graph_launch``, ``launch_all``) against one
``Device.launch`` call per task, and the kernels' shared read-only meta."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest

import graphexec as gx
from graphexec.engine.feeds import default_feeds
from graphexec.runtime import device as device_module
from graphexec.runtime.launch import launch_all

LIGHT = sorted((Path(onnx.__file__).parent / "backend" / "test" / "data" / "light").glob("*.onnx"))
SOME = [p for p in LIGHT if p.stem in ("light_inception_v1", "light_squeezenet")]


def _launched(compiled, feeds):
    """A timing-only launch and simulation; what the device and its simulator kept."""
    dev = compiled.device
    dev.reset_run()
    ctx = compiled.bind(compute=False)
    ctx.log = {}
    for name, value in feeds.items():
        compiled._feed(ctx, name, value, False)
    launch_all(ctx, compiled.schedule.order)
    dev.synchronize_device()
    launches = [(lc.task.name, lc.task.kind, lc.task.seq, lc.start, lc.end) for lc in dev.launches]
    finished = [(t.name, t.seq, t.enqueue_t, t.start_t, t.end_t, t.max_cores) for t in dev.sim.finished]
    return launches, finished, list(ctx.log), dev.host_t


@pytest.mark.parametrize("path", SOME, ids=[p.stem[6:] for p in SOME])
@pytest.mark.parametrize("launch", ["graph", "host"])
def test_the_graph_mode_loop_is_one_launch_call_per_task(path, launch, monkeypatch):
    graph = gx.load(path)
    feeds = default_feeds(graph)
    compiled = gx.Session(graph, streams=4, launch=launch).compile(feeds)
    fast = _launched(compiled, feeds)
    monkeypatch.setattr(device_module.Device, "graph_launch", lambda self: None)   # every task through launch
    plain = _launched(compiled, feeds)
    assert fast == plain and len(fast[0]) > 50
    assert len({start for _, _, _, start, _ in fast[0]}) == (1 if launch == "graph" else len(fast[0]))


def test_graph_launch_is_offered_only_where_launch_would_do_nothing_more():
    dev = device_module.Device("ascend910", graph_mode=True)
    assert dev.graph_launch() is None   # the model execute has not begun: the first launch stamps the clock
    s = dev.create_stream()
    dev.launch_kernel(s, "k", None)
    submit, record, start, end = dev.graph_launch()
    assert (start, end) == dev.launches[0][1:]
    with dev.on_device():
        assert dev.graph_launch() is None
    assert dev.graph_launch() is not None
    assert device_module.Device("ascend910", graph_mode=False).graph_launch() is None
    checked = device_module.Device("ascend910", graph_mode=True, check_hazards=True)
    checked.launch_kernel(checked.create_stream(), "k", None)
    assert checked.graph_launch() is None


def test_a_destroyed_stream_still_fails_the_launch():
    graph = gx.load(SOME[1])
    feeds = default_feeds(graph)
    compiled = gx.Session(graph, streams=2).compile(feeds)
    compiled.device.reset_run()
    ctx = compiled.bind(compute=False)
    ctx.log = {}
    ctx.streams[1].destroyed = True
    with pytest.raises(gx.GraphExecError, match="destroyed"):
        launch_all(ctx, compiled.schedule.order)


def test_kernels_share_one_read_only_meta_per_plan_task():
    graph = gx.load(SOME[0])
    feeds = default_feeds(graph)
    session = gx.Session(graph, streams=4)
    first = session.simulate(feeds)
    session.compile(feeds)._tape = None   # the next run simulates again, not replays
    second = session.run(feeds)
    assert {id(t) for t in first.run.tasks}.isdisjoint(id(t) for t in second.run.tasks)
    metas = [{id(t.meta) for t in r.run.tasks if t.kind == "kernel"} for r in (first, second)]
    assert metas[0] == metas[1] and len(metas[0]) == first.stats.num_kernels + first.stats.num_aicpu
    kernel = next(t for t in first.run.tasks if t.kind == "kernel")
    assert dict(kernel.meta) == {"task": kernel.meta["task"]} and kernel.meta["task"].name == kernel.name
    with pytest.raises(TypeError):
        kernel.meta["other"] = 1   # type: ignore[index]


@pytest.mark.parametrize("hazards", [False, True])
def test_the_plans_own_log_records_each_simulated_run_afresh(hazards):
    """The start and end callables are made once per plan over one log dict, cleared per
    run: runs that simulate again (the hazard checker always does) record the same tape as
    the first, and as a context with a log of its own (a partial per kernel)."""
    graph = gx.load(SOME[1])
    feeds = default_feeds(graph)
    session = gx.Session(graph, streams=3, check_hazards=hazards)
    compiled = session.compile(feeds)
    first = session.run(feeds)
    tape = compiled._tape.steps if compiled._tape is not None else list(compiled._log)
    compiled._tape = None
    second = session.run(feeds)
    again = compiled._tape.steps if compiled._tape is not None else list(compiled._log)   # the C loop keeps no log
    assert again == tape and len(tape) == 2 * len(compiled._kernels)
    assert repr(first.stats) == repr(second.stats)
    dev = compiled.device
    dev.reset_run()
    ctx = compiled.bind(compute=False)
    ctx.log = {}   # no ``starts``: the kernels' callables made per run
    for name, value in feeds.items():
        compiled._feed(ctx, name, value, False)
    launch_all(ctx, compiled.schedule.order)
    dev.synchronize_device()
    assert ctx.steps() == tape
