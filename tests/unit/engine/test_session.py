"""Session behaviour: caching per signature, determinism, views, memory plan, old-style graphs."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

import graphexec as gx


def _mlp(opset=13, batch="N"):
    w = numpy_helper.from_array(np.arange(12, dtype=np.float32).reshape(3, 4) / 10, "w")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("Flatten", ["r"], ["f"], axis=1), helper.make_node("Sigmoid", ["f"], ["y"])]
    g = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 4])], [w])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _expected(x):
    w = np.arange(12, dtype=np.float32).reshape(3, 4) / 10
    return 1 / (1 + np.exp(-np.maximum(x @ w, 0)))


def test_one_compile_per_signature():
    s = gx.Session(_mlp())
    for batch in (1, 5, 1, 5):
        x = np.ones((batch, 3), np.float32)
        np.testing.assert_allclose(s.run({"x": x}).outputs["y"], _expected(x), rtol=1e-6)
    assert len(s.plans) == 2


def test_deterministic_bit_identical_and_same_times():
    x = np.random.default_rng(0).standard_normal((7, 3)).astype(np.float32)
    a, b = gx.Session(_mlp()).run({"x": x}), gx.Session(_mlp()).run({"x": x})
    assert a.outputs["y"].tobytes() == b.outputs["y"].tobytes()
    assert a.stats.makespan_us == b.stats.makespan_us
    assert a.trace == b.trace


def test_views_launch_nothing_and_plan_has_offsets():
    s = gx.Session(_mlp())
    r = s.run({"x": np.ones((2, 3), np.float32)})
    ops = [e["args"]["op"] for e in r.trace["traceEvents"] if e.get("cat") == "kernel"]
    assert "Flatten" not in ops and ops == ["MatMul", "Sigmoid"]   # the Relu runs in the MatMul's kernel (fusion)
    entries = {e.tensor: e for e in s.memory_plan}
    assert "h" not in entries   # MatMul's output lives only inside the fused kernel
    assert r.stats.num_tasks == 2
    s = gx.Session(_mlp(), fusion=False)
    r = s.run({"x": np.ones((2, 3), np.float32)})
    ops = [e["args"]["op"] for e in r.trace["traceEvents"] if e.get("cat") == "kernel"]
    assert "Flatten" not in ops and ops == ["MatMul", "Relu", "Sigmoid"]
    entries = {e.tensor: e for e in s.memory_plan}
    assert entries["h"].offset % 512 == 0 and entries["h"].size == 2 * 4 * 4
    assert r.stats.num_tasks == 3


def test_old_style_initializers_as_inputs():
    m = _mlp(opset=7, batch=2)
    m.graph.input.append(helper.make_tensor_value_info("w", TensorProto.FLOAT, [3, 4]))
    g = gx.load(m)
    assert g.inputs == ["x"]
    x = np.ones((2, 3), np.float32)
    np.testing.assert_allclose(gx.Session(g).run({"x": x}).outputs["y"], _expected(x), rtol=1e-6)


def test_memory_reuse_keeps_outputs_and_saves_bytes():
    x = np.ones((64, 3), np.float32)
    on, off = gx.Session(_mlp(), memory_reuse=True), gx.Session(_mlp(), memory_reuse=False)
    a, b = on.run({"x": x}), off.run({"x": x})
    assert a.outputs["y"].tobytes() == b.outputs["y"].tobytes()
    assert a.stats.peak_bytes <= b.stats.peak_bytes


def test_constant_nodes_and_folding():
    shape = helper.make_node("Constant", [], ["s"], value=numpy_helper.from_array(np.array([2, 2], np.int64)))
    g = helper.make_graph([shape, helper.make_node("ConstantOfShape", ["s"], ["c"],
                                                   value=numpy_helper.from_array(np.array([3.0], np.float32))),
                           helper.make_node("Add", ["x", "c"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 2])])
    s = gx.Session(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
    r = s.run({"x": np.ones((2, 2), np.float32)})
    np.testing.assert_array_equal(r.outputs["y"], np.full((2, 2), 4, np.float32))
    assert r.stats.num_tasks == 1  # ConstantOfShape was folded at compile time
