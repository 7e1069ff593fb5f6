"""A run's fixed costs cut: feeds checked once per key, ``compile()`` sharing the default
feeds' plan, arrays passed through ``as_feeds`` as they are, a copy's bandwidth kept per
kind. Each against the plain path it skips."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import graphexec as gx
from graphexec.api import session as session_module
from graphexec.engine.compiled import clone_graph, compile_graph
from graphexec.engine.feed_values import _as_feed, as_feeds
from graphexec.engine.feeds import check_feeds, declared_types, default_feeds, feeds_key
from graphexec.runtime.device import Device

LIGHT = sorted((Path(onnx.__file__).parent / "backend" / "test" / "data" / "light").glob("*.onnx"))
ALEXNET = next(p for p in LIGHT if p.stem == "light_bvlc_alexnet")


def _numbers(result):
    return repr(replace(result.stats, compile_s=0.0)), result.trace


def _counting(monkeypatch):
    compiles = []
    real = session_module.compile
    monkeypatch.setattr(session_module, "compile", lambda *a, **k: compiles.append(1) or real(*a, **k))
    return compiles


def test_compile_with_no_feeds_is_the_default_feeds_plan(monkeypatch):
    graph = gx.load(ALEXNET)
    compiles = _counting(monkeypatch)
    session = gx.Session(graph, streams=4)
    plan = session.compile()
    assert session.simulate().run.plan is plan.plan and session.compile(default_feeds(graph)) is plan
    assert len(compiles) == 1
    assert declared_types(graph) == check_feeds(graph, default_feeds(graph))
    # the plan a compile for the declared types alone made (input_types empty) runs the same
    alone = compile_graph(clone_graph(graph), session.options, session.profile)
    assert list(map(repr, alone.schedule.order)) == list(map(repr, plan.schedule.order))   # Node: eq by identity
    assert alone.memory_plan == plan.memory_plan
    fresh = gx.Session(graph, streams=4)
    fresh._compile = lambda feeds: alone   # every run on that plan
    feeds = default_feeds(graph)
    assert _numbers(fresh.simulate(feeds)) == _numbers(gx.Session(graph, streams=4).simulate(feeds))


def _symbolic():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 4])
    return gx.load(helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y]),
                                     opset_imports=[helper.make_opsetid("", 17)]))


def test_a_symbolic_or_non_tensor_input_keeps_its_declared_types():
    graph = _symbolic()
    assert declared_types(graph) == {}
    assert check_feeds(graph, default_feeds(graph))["x"].shape == (1, 4)   # what a no-feeds simulate binds


def test_feeds_are_checked_once_per_key_and_bad_feeds_every_time(monkeypatch):
    graph = gx.load(ALEXNET)
    session = gx.Session(graph, streams=1)
    feeds = default_feeds(graph)
    checked = []
    real = session_module.check_feeds
    monkeypatch.setattr(session_module, "check_feeds", lambda g, f: checked.append(1) or real(g, f))
    first = session.compile(feeds)
    again = {k: v.copy() + 1 for k, v in feeds.items()}   # other values, the same dtypes and shapes
    assert session.compile(again) is first and len(checked) == 1
    name = next(iter(feeds))
    wrong = {name: feeds[name].astype(np.float64)}
    for _ in range(2):
        with pytest.raises(gx.GraphExecError, match="must be float32"):
            session.compile(wrong)
    assert len(checked) == 3
    listed = {name: feeds[name].tolist()}   # not an array: no key, checked each time
    assert feeds_key(listed) is None and feeds_key(feeds) == ((name, feeds[name].dtype, feeds[name].shape),)


def test_as_feeds_passes_arrays_as_they_are():
    graph = gx.load(ALEXNET)
    feeds = default_feeds(graph)
    given = {**feeds, "stranger": np.zeros(2)}
    out = as_feeds(graph, given)
    assert all(out[k] is v for k, v in given.items())
    assert all(_as_feed(graph, k, v) is v for k, v in given.items())   # what the plain path returns


@pytest.mark.parametrize("kind", ["h2d", "d2h", "d2d", "h2h"])
def test_a_copys_bandwidth_is_the_profiles(kind):
    dev = Device("ascend910")
    for nbytes in (0, 1000, 12345):
        t0 = dev.host_t
        dev.memcpy_sync(nbytes, kind, lambda: None)
        plain = 10e3 if kind == "h2h" else dev.profile.copy_bytes_per_us(kind)
        assert dev.host_t == t0 + dev.profile.task_overhead_us + nbytes / plain
    with pytest.raises(gx.GraphExecError, match="unknown copy kind"):
        dev.memcpy_sync(1, "sideways", lambda: None)
    with pytest.raises(gx.GraphExecError, match="unknown copy kind"):
        dev.memcpy_sync(1, "sideways", lambda: None)


def _dynamic():
    """Relu, then NonZero (its output sized only when computed), then a Cast of that."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [6])
    outs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [6]),
            helper.make_tensor_value_info("z", TensorProto.FLOAT, None)]
    nodes = [helper.make_node("Relu", ["x"], ["y"]), helper.make_node("NonZero", ["y"], ["nz"]),
             helper.make_node("Cast", ["nz"], ["z"], to=TensorProto.FLOAT)]
    return gx.load(helper.make_model(helper.make_graph(nodes, "g", [x], outs),
                                     opset_imports=[helper.make_opsetid("", 17)]))


@pytest.mark.parametrize("make", [_dynamic, lambda: gx.load(ALEXNET)], ids=["run-time-sized", "alexnet"])
def test_replays_through_the_kept_calls_are_fresh_first_runs(make):
    graph = make()
    session = gx.Session(graph, streams=2)
    for x in ([-1.0, 2.0, 0.0, 3.0, -4.0, 5.0], [1.0, 0.0, 0.0, -2.0, 7.0, 0.0], None):
        feeds = {"x": np.array(x, np.float32)} if graph.name == "g" and x is not None else default_feeds(graph)
        again = session.run(feeds)
        fresh = gx.Session(graph, streams=2).run(feeds)
        assert session.compile(feeds)._steps is not None
        assert {k: (v.dtype, v.shape, v.tobytes()) for k, v in again.outputs.items()} == \
            {k: (v.dtype, v.shape, v.tobytes()) for k, v in fresh.outputs.items()}
        assert _numbers(again)[0] == _numbers(fresh)[0]


def test_gc_paused_pauses_nests_and_restores_as_the_generator_did():
    import gc

    from graphexec._limits import gc_paused

    was = gc.isenabled()
    try:
        gc.enable()
        with gc_paused():
            assert not gc.isenabled()
            with gc_paused():
                assert not gc.isenabled()
            assert not gc.isenabled()   # the inner one found it paused: it leaves it paused
        assert gc.isenabled()
        with pytest.raises(KeyError):
            with gc_paused():
                raise KeyError("x")
        assert gc.isenabled()
        gc.disable()
        with gc_paused():
            pass
        assert not gc.isenabled()   # off before: off after
    finally:
        (gc.enable if was else gc.disable)()


@pytest.mark.parametrize("feeds", [(("x", np.ones(2, np.float32)),), [np.ones(2, np.float32)]])
def test_compile_names_feeds_that_are_not_a_mapping(feeds):
    """compile() checks its feeds' type before keying them, as run() does: one FeedError line."""
    h = helper
    g = h.make_graph([h.make_node("Relu", ["x"], ["y"])], "g", [h.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                     [h.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    session = gx.Session(gx.load(h.make_model(g, opset_imports=[h.make_opsetid("", 17)])))
    with pytest.raises(gx.FeedError, match="feeds must be a mapping of input name to array, not (tuple|list)"):
        session.compile(feeds)
