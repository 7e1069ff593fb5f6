"""Export: what YAML has no syntax for (subgraphs, tensor attributes, empty lists, strings) round-trips; model-local
functions are inlined at load, so their bodies round-trip as nodes."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

import graphexec as gx
from graphexec.errors import ExportError
from graphexec.frontend.convert import onnx_model, save, yaml_data, yaml_text
from graphexec.frontend.yaml import loads_yaml


def _model() -> onnx.ModelProto:
    then = helper.make_graph([helper.make_node("Add", ["x", "one"], ["t"])], "then", [],
                             [helper.make_tensor_value_info("t", T.FLOAT, [3])])
    other = helper.make_graph([helper.make_node("Sub", ["x", "one"], ["e"])], "else", [],
                              [helper.make_tensor_value_info("e", T.FLOAT, [3])])
    fn = helper.make_function("local", "Twice", ["a"], ["b"], [helper.make_node("Add", ["a", "a"], ["b"])],
                              [helper.make_opsetid("", 13)])
    nodes = [
        helper.make_node("ConstantOfShape", ["shape"], ["one"], value=numpy_helper.from_array(np.array([1.5], np.float32))),
        helper.make_node("ReduceSum", ["x"], ["s"], keepdims=1),
        helper.make_node("Greater", ["s", "zero"], ["c0"]),
        helper.make_node("Squeeze", ["c0"], ["c"]),
        helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other),
        helper.make_node("LeakyRelu", ["m"], ["l"], alpha=0.1),
        helper.make_node("Twice", ["l"], ["z"], domain="local"),
        helper.make_node("Pad", ["m", "pads"], ["p"], mode="constant"),
    ]
    inits = [numpy_helper.from_array(np.array([3], np.int64), "shape"),
             numpy_helper.from_array(np.array([0], np.float32), "zero"),
             numpy_helper.from_array(np.array([0, 1, 0, 1], np.int64), "pads"),
             numpy_helper.from_array(np.array(["a", "bc"], dtype=object), "names")]
    g = helper.make_graph(nodes, "ifm", [helper.make_tensor_value_info("x", T.FLOAT, [3]),
                                         helper.make_tensor_value_info("m", T.FLOAT, [2, 3])],
                          [helper.make_tensor_value_info(n, T.FLOAT, None) for n in ("y", "z", "p")], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("local", 1)],
                             functions=[fn])


FEEDS = {"x": np.array([1, -5, 2], np.float32), "m": np.arange(6, dtype=np.float32).reshape(2, 3) - 2}


def test_subgraphs_tensor_attrs_strings_and_functions_round_trip():
    g = gx.load(_model())
    text = yaml_text(yaml_data(g)[0])
    assert "value: [a, bc]" in text and "{graph: " in text
    assert "onnx_functions:" not in text and "op: Twice" not in text   # inlined at load: an Add
    from_yaml = loads_yaml(text, "ifm.yaml")
    assert from_yaml.nodes[[n.op for n in from_yaml.nodes].index("If")].implicit_inputs == ["one", "x"]
    want = gx.Session(g).run(FEEDS).outputs
    for other in (from_yaml, gx.load(onnx_model(from_yaml))):
        got = gx.Session(other).run(FEEDS).outputs
        assert {k: v.tobytes() for k, v in got.items()} == {k: v.tobytes() for k, v in want.items()}
    np.testing.assert_array_equal(want["y"], FEEDS["x"] - 1.5)


@gx.kernel("TestEmptyAttrs", shape="same")
def _keep(x, **attrs):
    return x


def test_empty_list_attributes_keep_their_type():
    text = ("name: e\nopset: 17\ninputs: [x]\noutputs: [y]\ntensors: {x: {dtype: float32, shape: [2]}}\n"
            "nodes: [{op: TestEmptyAttrs, inputs: [x], outputs: [y], attributes: {a: {floats: []}, b: []}}]\n")
    g = loads_yaml(text, "e.yaml")
    A = onnx.AttributeProto
    assert {a.name: a.type for a in g.nodes[0].proto.attribute} == {"a": A.FLOATS, "b": A.INTS}
    assert yaml_data(g)[0]["nodes"][0]["attributes"] == {"a": {"floats": []}, "b": {"ints": []}}
    again = gx.load(onnx_model(g))
    assert {a.name: a.type for a in again.nodes[0].proto.attribute} == {"a": A.FLOATS, "b": A.INTS}


def test_big_constants_go_to_the_npz_beside(tmp_path):
    b = gx.GraphBuilder("big", opset=17)
    x = b.input("x", "float32", [100])
    b.output(b.Add(x, b.constant(np.arange(100, dtype=np.float32), "w")))
    written = save(b.build(), tmp_path / "big.yaml")
    assert written == [tmp_path / "big.yaml", tmp_path / "big.npz"]
    assert "file: big.npz" in (tmp_path / "big.yaml").read_text()
    np.testing.assert_array_equal(gx.load(tmp_path / "big.yaml").values["w"].const, np.arange(100))


@pytest.mark.parametrize("name", ["file", "allow_pickle", "arr_0"])
def test_big_constants_keep_names_that_np_savez_would_take_for_its_own(tmp_path, name):
    b = gx.GraphBuilder("names", opset=17)
    x = b.input("x", "float32", [100])
    b.output(b.Add(x, b.constant(np.arange(100, dtype=np.float32), name)))
    save(b.build(), tmp_path / "g.yaml")
    assert list(np.load(tmp_path / "g.npz", allow_pickle=False)) == [name]
    np.testing.assert_array_equal(gx.load(tmp_path / "g.yaml").values[name].const, np.arange(100))


def test_what_cannot_be_written():
    g = gx.load(_model())
    with pytest.raises(ExportError, match=r"big\.txt: can write \.yaml, \.yml or \.onnx, not \.txt$"):
        save(g, "big.txt")
    seq = helper.make_model(helper.make_graph(
        [helper.make_node("SequenceLength", ["s"], ["n"])], "seq",
        [helper.make_tensor_sequence_value_info("s", T.FLOAT, None)], [helper.make_tensor_value_info("n", T.INT64, [])]),
        opset_imports=[helper.make_opsetid("", 17)])
    # a sequence input is written with its type now (it used to be refused: YAML held tensors only)
    assert yaml_data(gx.load(seq))[0]["tensors"]["s"] == {"kind": "sequence", "type": "seq(tensor(float))"}
