"""A control-flow body's kernels through its plan's replay steps (``Steps.inline``) where a
step can bind them, against the plain path (every kernel's KernelCall): the same bytes and
stats, iteration after iteration and run after run."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import graphexec as gx
from graphexec import _switch

RNG = np.random.default_rng(9)


def _loop(trips: int = 5):
    """x <- Tanh(x @ W + b), ``trips`` times; W and b are the body's own initializers."""
    wa, ba = RNG.standard_normal((8, 8)).astype(np.float32) * 0.5, RNG.standard_normal(8).astype(np.float32)
    w, b = numpy_helper.from_array(wa, "w"), numpy_helper.from_array(ba, "b")
    body = helper.make_graph(
        [helper.make_node("Identity", ["c_in"], ["c_out"]), helper.make_node("MatMul", ["x_in", "w"], ["xw"]),
         helper.make_node("Add", ["xw", "b"], ["xb"]), helper.make_node("Tanh", ["xb"], ["x_out"])],
        "body", [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                 helper.make_tensor_value_info("c_in", TensorProto.BOOL, []),
                 helper.make_tensor_value_info("x_in", TensorProto.FLOAT, [2, 8])],
        [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("x_out", TensorProto.FLOAT, [2, 8])], [w, b])
    inits = [numpy_helper.from_array(np.array(trips, np.int64), "trips"),
             numpy_helper.from_array(np.array(True), "go")]
    graph = helper.make_graph([helper.make_node("Loop", ["trips", "go", "x"], ["y"], body=body)], "loop",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])], inits)
    return gx.load(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])), wa, ba


@pytest.mark.parametrize("fusion", [True, False])   # the body as one chain of binds, or as direct kernels
def test_a_loop_body_computes_through_its_steps_as_the_plain_path(fusion):
    graph, w, b = _loop()
    feeds = {"x": RNG.standard_normal((2, 8)).astype(np.float32)}
    session = gx.Session(graph, fusion=fusion)
    results = [session.run(feeds) for _ in range(3)]
    (ctrl,) = session.compile(feeds).controls.values()
    (steps,) = [p._steps for body in ctrl.bodies for p in body.plans.values()]
    assert steps is not None and (bool(steps.chains) if fusion else any(r is not None for r in steps.runners))
    other = {"x": RNG.standard_normal((2, 8)).astype(np.float32)}
    results.append(session.run(other))
    with _switch.plain():
        plain = gx.Session(graph, fusion=fusion)
        want = [plain.run(f) for f in (feeds, feeds, feeds, other)]
    for got, ref in zip(results, want):
        assert got.outputs["y"].tobytes() == ref.outputs["y"].tobytes()
        assert replace(got.stats, compile_s=0.0, host_time_us=0.0) == \
            replace(ref.stats, compile_s=0.0, host_time_us=0.0)
    y = other["x"]
    for _ in range(5):
        y = np.tanh(y @ w + b)
    np.testing.assert_allclose(results[-1].outputs["y"], y, rtol=1e-5, atol=1e-6)


def _outer_loop(trips: int = 4):
    """x <- Tanh(x @ W + s): W an initializer of the graph around the body, s computed there
    from a feed (so it differs run to run); the body reads both from the outer scope."""
    wa = RNG.standard_normal((8, 8)).astype(np.float32) * 0.5
    body = helper.make_graph(
        [helper.make_node("Identity", ["c_in"], ["c_out"]), helper.make_node("MatMul", ["x_in", "w"], ["xw"]),
         helper.make_node("Add", ["xw", "s"], ["xb"]), helper.make_node("Tanh", ["xb"], ["x_out"])],
        "body", [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                 helper.make_tensor_value_info("c_in", TensorProto.BOOL, []),
                 helper.make_tensor_value_info("x_in", TensorProto.FLOAT, [2, 8])],
        [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("x_out", TensorProto.FLOAT, [2, 8])])
    inits = [numpy_helper.from_array(np.array(trips, np.int64), "trips"), numpy_helper.from_array(np.array(True), "go"),
             numpy_helper.from_array(wa, "w"), numpy_helper.from_array(np.array(2.0, np.float32), "two")]
    nodes = [helper.make_node("Mul", ["t", "two"], ["s"]),
             helper.make_node("Loop", ["trips", "go", "x"], ["y"], body=body)]
    graph = helper.make_graph(nodes, "loop", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8]),
                                              helper.make_tensor_value_info("t", TensorProto.FLOAT, [8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])], inits)
    return gx.load(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])), wa


@pytest.mark.parametrize("fusion", [True, False])
def test_outer_scope_values_are_bound_once_per_loop_run_as_the_plain_path(fusion):
    graph, w = _outer_loop()
    runs = [{"x": RNG.standard_normal((2, 8)).astype(np.float32), "t": RNG.standard_normal(8).astype(np.float32)}
            for _ in range(3)]
    runs.insert(1, runs[0])
    session = gx.Session(graph, fusion=fusion)
    results = [session.run(f) for f in runs]
    (ctrl,) = session.compile(runs[0]).controls.values()
    (steps,) = [p._steps for body in ctrl.bodies for p in body.plans.values()]
    assert steps._reading and all(steps.runners[i] is not None or steps.held[i] for i in steps._reading)
    with _switch.plain():
        plain = gx.Session(graph, fusion=fusion)
        want = [plain.run(f) for f in runs]
    for got, ref in zip(results, want):   # s changed between runs: bound anew each Loop run
        assert got.outputs["y"].tobytes() == ref.outputs["y"].tobytes()
        assert replace(got.stats, compile_s=0.0) == replace(ref.stats, compile_s=0.0)
    y = runs[-1]["x"]
    for _ in range(4):
        y = np.tanh(y @ w + runs[-1]["t"] * 2)
    np.testing.assert_allclose(results[-1].outputs["y"], y, rtol=1e-5, atol=1e-6)


def test_the_scripted_greedy_loop_binds_its_outer_weights_as_the_plain_path():
    path = Path(__file__).resolve().parents[3] / "models" / "scripted_greedy_loop.onnx"
    h = [RNG.standard_normal((2, 8)).astype(np.float32) for _ in range(2)]
    runs = [{"h": x, "steps": np.array(n, np.int64)} for x, n in ((h[0], 6), (h[1], 6), (h[0], 9))]
    session = gx.Session(gx.load(path))
    results = [session.run(f) for f in runs]
    with _switch.plain():
        plain = gx.Session(gx.load(path))
        want = [plain.run(f) for f in runs]
    for got, ref in zip(results, want):
        assert got.outputs["tokens"].tobytes() == ref.outputs["tokens"].tobytes()
        assert replace(got.stats, compile_s=0.0) == replace(ref.stats, compile_s=0.0)
        assert got.trace == ref.trace
    (steps,) = [p._steps for c in session.compile(runs[0]).controls.values() for b in c.bodies
                for p in b.plans.values()]
    assert len(steps._reading) >= 3 and all(steps.runners[i] is not None or steps.held[i] for i in steps._reading)
