"""Timing-only runs (``Session.simulate``, ``Session(compute=False)``) give a full run's
stats, trace, memory plan and diagnosis, bit for bit: the oracle is the full run itself,
on a separate session (so the simulation really runs again, no tape is shared)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import graphexec as gx
from graphexec.engine.feeds import default_feeds
from graphexec.errors import GraphExecError

LIGHT = sorted((Path(onnx.__file__).parent / "backend" / "test" / "data" / "light").glob("*.onnx"))


def _numbers(result):
    """Everything a run's simulated numbers are (compile time apart: two compiles)."""
    stats = dataclasses.replace(result.stats, compile_s=0.0)
    diagnosis = result.diagnosis
    return stats, result.trace, diagnosis.to_dict() if hasattr(diagnosis, "to_dict") else repr(diagnosis)


def _plan(session):
    return [(e.tensor, e.offset, e.size, e.region, e.alias_of) for e in session.memory_plan.entries]


@pytest.mark.parametrize("path", LIGHT, ids=[p.stem[6:] for p in LIGHT])
def test_timing_only_equals_a_full_run_on_every_light_model(path):
    graph = gx.load(path)
    full, timing = gx.Session(graph, streams=4), gx.Session(graph, streams=4)
    ran, simulated = full.run(default_feeds(graph)), timing.simulate()
    assert simulated.outputs == {}
    assert _numbers(simulated) == _numbers(ran)
    assert _plan(timing) == _plan(full)
    assert "computed" not in simulated.stats.extra


def test_timing_only_is_faster_than_computing():
    graph = gx.load(LIGHT[[p.stem for p in LIGHT].index("light_resnet50")])
    feeds = default_feeds(graph)
    full, timing = gx.Session(graph, streams=2), gx.Session(graph, streams=2)
    full.compile(feeds), timing.compile(feeds)
    import time
    t0 = time.perf_counter()
    full.run(feeds)
    t1 = time.perf_counter()
    timing.simulate(feeds)
    t2 = time.perf_counter()
    assert (t2 - t1) * 5 < t1 - t0   # resnet50's math dwarfs its simulation (>100x here)


def test_compute_false_session_runs_timing_only():
    graph = gx.load(LIGHT[[p.stem for p in LIGHT].index("light_squeezenet")])
    feeds = default_feeds(graph)
    ran = gx.Session(graph, streams=3, policy="chains").run(feeds)
    lazy = gx.Session(graph, streams=3, policy="chains", compute=False).run(feeds)
    assert lazy.outputs == {} and _numbers(lazy) == _numbers(ran)


def test_hazard_checker_sees_the_same_in_a_timing_only_run():
    graph = gx.load(LIGHT[[p.stem for p in LIGHT].index("light_squeezenet")])
    ran = gx.Session(graph, streams=4, check_hazards=True).run(default_feeds(graph))
    simulated = gx.Session(graph, streams=4, check_hazards=True).simulate()
    assert simulated.stats.extra["hazards"] == ran.stats.extra["hazards"]
    assert _numbers(simulated) == _numbers(ran)


@pytest.mark.parametrize("parallel,batch", [("data", 2), ("pipeline", 2), ("tensor", 1), ("auto", 2)])
def test_timing_only_across_cards_equals_the_full_run(parallel, batch):
    graph = gx.load(LIGHT[[p.stem for p in LIGHT].index("light_squeezenet")])
    shapes = {graph.inputs[0]: (batch, 3, 224, 224)}
    feeds = default_feeds(graph, shapes)
    ran = gx.Session(graph, streams=2, devices=2, parallel=parallel).run(feeds)
    session = gx.Session(graph, streams=2, devices=2, parallel=parallel)
    simulated = session.simulate(shapes=shapes)
    assert simulated.outputs == {}
    assert dataclasses.replace(simulated.stats, compile_s=0.0) == dataclasses.replace(ran.stats, compile_s=0.0)
    assert simulated.trace == ran.trace
    again = session.run(feeds)   # the weights the timing-only run left unwritten are written now
    assert {k: v.tobytes() for k, v in again.outputs.items()} == {k: v.tobytes() for k, v in ran.outputs.items()}


def _if_model():
    """y = x + 1 if sum(x) > 0 else x * x * x (the else branch has twice the kernels)."""
    one = numpy_helper.from_array(np.ones(4, np.float32), "one")
    then = helper.make_graph([helper.make_node("Add", ["x", "one"], ["t"])], "then", [],
                             [helper.make_tensor_value_info("t", TensorProto.FLOAT, [4])])
    cube = [helper.make_node("Mul", ["x", "x"], ["sq"]), helper.make_node("Mul", ["sq", "x"], ["e"])]
    other = helper.make_graph(cube, "else", [], [helper.make_tensor_value_info("e", TensorProto.FLOAT, [4])])
    nodes = [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
             helper.make_node("Greater", ["s", "zero"], ["c"]),
             helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)]
    g = helper.make_graph(nodes, "if", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
                          [one, numpy_helper.from_array(np.array(0, np.float32), "zero")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


@pytest.mark.parametrize("x", [np.arange(4, dtype=np.float32), -np.arange(1, 5, dtype=np.float32)])
def test_control_flow_is_computed_never_estimated(x):
    """The branch decides the timeline: simulate computes it on the feeds and says so."""
    ran = gx.Session(_if_model()).run({"x": x})
    simulated = gx.Session(_if_model()).simulate({"x": x})
    assert "If" in simulated.stats.extra.pop("computed")
    assert _numbers(simulated) == _numbers(ran)
    np.testing.assert_array_equal(simulated.outputs["y"], ran.outputs["y"])


def test_control_flow_without_feeds_uses_the_default_inputs():
    model = _if_model()
    ran = gx.Session(model).run(default_feeds(gx.load(model)))
    simulated = gx.Session(model).simulate()
    assert simulated.stats.extra.pop("computed").startswith("control flow (If")
    assert _numbers(simulated) == _numbers(ran)


def test_shapes_pick_the_signature_and_feeds_exclude_shapes():
    w = numpy_helper.from_array(np.ones((3, 4), np.float32), "w")
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "mm",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])], [w])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    small, big = gx.Session(model).simulate(shapes={"x": (1, 3)}), gx.Session(model).simulate(shapes={"x": (4096, 3)})
    assert big.stats.makespan_us > small.stats.makespan_us
    assert _numbers(big) == _numbers(gx.Session(model).run({"x": np.zeros((4096, 3), np.float32)}))
    with pytest.raises(GraphExecError, match="feeds or shapes"):
        gx.Session(model).simulate({"x": np.zeros((1, 3), np.float32)}, shapes={"x": (1, 3)})
    with pytest.raises(GraphExecError, match="'z'"):
        gx.Session(model).simulate(shapes={"z": (1, 3)})


def test_weights_reach_device_memory_only_for_a_computing_run():
    """A timing-only run leaves the weight region unwritten (its copies are on the clock
    only); the first run that computes writes them, and its outputs equal a fresh session's."""
    w = np.arange(12, dtype=np.float32).reshape(3, 4) / 7
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "mm",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
                          [numpy_helper.from_array(w, "w")])
    graph = gx.load(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
    feeds = {"x": np.ones((2, 3), np.float32)}
    s = gx.Session(graph)
    timing = s.simulate(feeds)
    c = s.compiled
    on_device = c.device.view(c.weight_at["w"], w.dtype, w.shape)
    assert not np.array_equal(on_device, w)   # not moved yet
    out = s.run(feeds)
    assert np.array_equal(on_device, w)
    assert out.outputs["y"].tobytes() == gx.Session(graph).run(feeds).outputs["y"].tobytes()
    assert _numbers(timing)[0] == _numbers(out)[0]
