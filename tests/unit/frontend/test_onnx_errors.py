"""Bad models and bad feeds: each a GraphExecError with one exact line."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import graphexec as gx


def _model(nodes, inputs=("x",), outputs=("y",), opset=17, domains=()):
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 3]) for n in inputs],
                          [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 3]) for n in outputs])
    ops = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, 1) for d in domains]
    return helper.make_model(g, opset_imports=ops)


def test_missing_file(tmp_path):
    with pytest.raises(gx.ModelLoadError, match=r"^.*nope\.onnx: no such file$"):
        gx.load(tmp_path / "nope.onnx")


def test_not_onnx(tmp_path):
    p = tmp_path / "x.onnx"
    p.write_bytes(b"\xff\xfe garbage \x00\x01")
    with pytest.raises(gx.ModelLoadError, match="not a valid ONNX file"):
        gx.load(p)


def test_truncated(tmp_path):
    data = _model([helper.make_node("Relu", ["x"], ["y"])]).SerializeToString()
    p = tmp_path / "t.onnx"
    p.write_bytes(data[: len(data) // 2])
    with pytest.raises(gx.ModelLoadError) as e:
        gx.load(p)
    assert str(p) in str(e.value) and "\n" not in str(e.value)


def test_cycle_names_the_nodes():
    m = _model([helper.make_node("Add", ["x", "b"], ["a"], name="A"),
                helper.make_node("Relu", ["a"], ["b"], name="B"),
                helper.make_node("Relu", ["a"], ["y"], name="C")])
    with pytest.raises(gx.GraphError, match=r"^g: the graph has a cycle: A \(Add\) -> B \(Relu\) -> A \(Add\)$"):
        gx.load(m)


def test_dangling_input():
    m = _model([helper.make_node("Add", ["x", "ghost"], ["y"], name="add")])
    with pytest.raises(gx.GraphError, match=r"^g: node add \(Add\) reads 'ghost', which no node, input or "
                                            r"initializer produces$"):
        gx.load(m)


def test_duplicate_output():
    m = _model([helper.make_node("Relu", ["x"], ["y"], name="r1"), helper.make_node("Relu", ["x"], ["y"], name="r2")])
    with pytest.raises(gx.GraphError, match=r"^g: value 'y' is written twice \(again by node r2 \(Relu\)\)$"):
        gx.load(m)


def test_newer_opset():
    m = _model([helper.make_node("Relu", ["x"], ["y"])], opset=onnx.defs.onnx_opset_version() + 5)
    with pytest.raises(gx.ModelLoadError, match="is newer than the installed onnx knows"):
        gx.load(m)


def test_unknown_custom_op():
    m = _model([helper.make_node("Frobnicate", ["x"], ["y"], name="f", domain="com.acme")], domains=["com.acme"])
    with pytest.raises(gx.UnsupportedOpError,
                       match=r"^g: node f \(Frobnicate\): no kernel or fallback knows op com\.acme::Frobnicate$"):
        gx.Session(gx.load(m)).run({"x": np.zeros((2, 3), np.float32)})


@pytest.fixture
def relu_session():
    return gx.Session(gx.load(_model([helper.make_node("Relu", ["x"], ["y"])])))


@pytest.mark.parametrize("feeds,message", [
    ({"z": np.zeros((2, 3), np.float32)}, "feed 'z' is not an input of the graph; inputs are: x"),
    ({}, "input 'x' is missing from the feeds"),
    ({"x": np.zeros((2, 3), np.float64)}, "input 'x' must be float32, got float64"),
    ({"x": np.zeros((2, 4), np.float32)}, "input 'x' dim 1 must be 3, got 4 (shape [2,4])"),
    ({"x": np.zeros((6,), np.float32)}, "input 'x' must have rank 2 (shape [2,3]), got shape [6]"),
])
def test_bad_feeds(relu_session, feeds, message):
    with pytest.raises(gx.FeedError) as e:
        relu_session.run(feeds)
    assert str(e.value) == message


def test_symbolic_dims_must_agree():
    g = helper.make_graph([helper.make_node("Add", ["a", "b"], ["y"])], "g",
                          [helper.make_tensor_value_info("a", TensorProto.FLOAT, ["N", 3]),
                           helper.make_tensor_value_info("b", TensorProto.FLOAT, ["N", 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])])
    s = gx.Session(gx.load(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])))
    with pytest.raises(gx.FeedError, match=r"input 'b' dim 0 \('N'\) is 4, but 'N' is 2 elsewhere"):
        s.run({"a": np.zeros((2, 3), np.float32), "b": np.zeros((4, 3), np.float32)})
