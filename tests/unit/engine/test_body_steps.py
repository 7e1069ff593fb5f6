"""A control-flow body's kernels through its plan's replay steps (``Steps.inline``) where a
step can bind them, against the plain path (every kernel's KernelCall): the same bytes and
stats, iteration after iteration and run after run."""

from __future__ import annotations

from dataclasses import replace

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
