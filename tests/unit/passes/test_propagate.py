"""The shapes pass walks the nodes after each whole-model inference (``passes/propagate.py``):
chains of custom ops and of shapes that only a fold makes constant are typed in one or two
rounds instead of one round per link, with the same types the long alternation gave."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import graphexec as gx
from graphexec.passes import shape_inference


def _model(nodes: list[onnx.NodeProto], out: str, inits: list[onnx.TensorProto] = ()) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])],
                              [helper.make_tensor_value_info(out, TensorProto.FLOAT, None)], list(inits))
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    return helper.make_model(graph, opset_imports=opsets)


def _custom_chain(links: int) -> onnx.ModelProto:
    """x -> (FastGelu -> Relu) * links: onnx knows no FastGelu, so each link stopped its inference."""
    nodes, prev = [], "x"
    for i in range(links):
        nodes.append(helper.make_node("FastGelu", [prev], [f"g{i}"], domain="com.microsoft"))
        nodes.append(helper.make_node("Relu", [f"g{i}"], [f"r{i}"]))
        prev = f"r{i}"
    return _model(nodes, prev)


def _fold_chain(links: int) -> onnx.ModelProto:
    """Each link reshapes by a shape computed through Cast and Mul, which onnx's data
    propagation does not follow: only a fold makes it constant, once the input is typed."""
    nodes, prev = [], "x"
    inits = [helper.make_tensor("one", TensorProto.FLOAT, [], [1.0])]
    for i in range(links):
        nodes += [helper.make_node("Shape", [prev], [f"s{i}"]),
                  helper.make_node("Cast", [f"s{i}"], [f"f{i}"], to=TensorProto.FLOAT),
                  helper.make_node("Mul", [f"f{i}", "one"], [f"m{i}"]),
                  helper.make_node("Cast", [f"m{i}"], [f"c{i}"], to=TensorProto.INT64),
                  helper.make_node("Reshape", [prev, f"c{i}"], [f"y{i}"]),
                  helper.make_node("Relu", [f"y{i}"], [f"z{i}"])]
        prev = f"z{i}"
    return _model(nodes, prev, inits)


def _count(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = shape_inference._onnx_infer
    monkeypatch.setattr(shape_inference, "_onnx_infer", lambda *a: calls.append(1) or real(*a))
    return calls


@pytest.mark.parametrize("make", [_custom_chain, _fold_chain])
def test_a_long_chain_is_typed_in_two_whole_model_inferences(make, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _count(monkeypatch)
    compiled = gx.Session(gx.load(make(8))).compile()
    graph = compiled.graph
    assert all(v.type.is_static for v in graph.values.values() if v.type.kind == "tensor"), \
        [n for n, v in graph.values.items() if not v.type.is_static]
    assert len(calls) <= 3


@pytest.mark.parametrize("make", [_custom_chain, _fold_chain])
def test_the_chain_runs_as_onnxruntime_does(make) -> None:
    ort = pytest.importorskip("onnxruntime")
    model = make(4)
    x = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
    ours = gx.Session(gx.load(model)).run({"x": x}).outputs
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(next(iter(ours.values())), want, rtol=1e-6, atol=1e-6)


def test_single_node_inference_leaves_what_onnx_cannot_say() -> None:
    """A node whose input is still untyped gets no type from the walk (it is typed at run time)."""
    from graphexec.passes.propagate import type_node

    g = gx.load(_custom_chain(2))
    relu = next(n for n in g.nodes if n.op == "Relu")   # r0, not declared: only inference types it
    assert g.values["g0"].type.dtype is None
    assert not type_node(g, relu, None)
    assert g.values["r0"].type.dtype is None
