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


def test_an_if_reading_a_value_folded_in_the_walk_is_folded_too() -> None:
    """s = Shape(Relu(x)) becomes constant only in the walk; an If with a constant condition
    reads s through its branches alone (an outer-scope read), and folds with it (found in review)."""
    then = helper.make_graph([helper.make_node("Identity", ["s"], ["t"])], "then", [],
                             [helper.make_tensor_value_info("t", TensorProto.INT64, None)])
    other = helper.make_graph([helper.make_node("Neg", ["s"], ["e"])], "else", [],
                              [helper.make_tensor_value_info("e", TensorProto.INT64, None)])
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Shape", ["r"], ["s"]),
             helper.make_node("Constant", [], ["c"], value=helper.make_tensor("cv", TensorProto.BOOL, [], [True])),
             helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other),
             helper.make_node("Mul", ["r", "r"], ["z"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])],
                              [helper.make_tensor_value_info("y", TensorProto.INT64, None),
                               helper.make_tensor_value_info("z", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    result = gx.Session(gx.load(model), streams=2).run({"x": np.ones((2, 3), np.float32)})
    assert result.outputs["y"].tolist() == [2, 3]
    assert result.stats.num_tasks == 2   # Relu and Mul: the Shape and the If folded
