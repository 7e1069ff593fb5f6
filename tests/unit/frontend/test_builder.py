"""gx.GraphBuilder: graphs in code, typed as they grow, with the same checks and messages as YAML."""

from __future__ import annotations

import numpy as np
import pytest

import graphexec as gx
from graphexec.frontend.convert import onnx_model, yaml_data, yaml_text
from graphexec.frontend.yaml import loads_yaml

W = np.arange(12, dtype=np.float32).reshape(3, 4) / 10


def mlp(batch="N"):
    b = gx.GraphBuilder("mlp", opset=17)
    x = b.input("x", "float32", [batch, 3])
    h = b.MatMul(x, b.constant(W, "w"), name="mm", stream_label="main", priority=1)
    y = b.op("Sigmoid", b.Add(b.Relu(h), 0.5), name="sig", outputs=["y"])
    b.output(y)
    return b, x, h, y


def test_types_are_known_as_ops_are_added():
    b, x, h, y = mlp()
    assert str(x.type) == "float32[Nx3]" and str(h.type) == "float32[Nx4]" and y.shape == ("N", 4)
    assert y.name == "y" and y.dtype == np.float32


def test_build_runs_and_matches_numpy():
    b, *_ = mlp()
    g = b.build()
    assert [n.op for n in g.nodes] == ["MatMul", "Relu", "Add", "Sigmoid"]
    assert g.nodes[0].meta == {"stream_label": "main", "priority": 1} and g.source == "<builder>"
    x = np.linspace(-1, 1, 15, dtype=np.float32).reshape(5, 3)
    y = gx.Session(gx.load(b)).run({"x": x}).outputs["y"]
    np.testing.assert_allclose(y, 1 / (1 + np.exp(-(np.maximum(x @ W, 0) + 0.5))), rtol=1e-6)


def test_python_numbers_take_the_dtype_of_the_first_tensor():
    b, *_ = mlp()
    consts = [v.const for v in b.graph.values.values() if v.const is not None and v.const.ndim == 0]
    assert [c.dtype for c in consts] == [np.float32]


def test_build_is_a_snapshot():
    b, x, h, y = mlp()
    g1 = b.build()
    b.output(b.Neg(y))
    assert len(g1.nodes) == 4 and len(b.build().nodes) == 5


def test_multiple_outputs_and_omitted_inputs():
    b = gx.GraphBuilder("split", opset=17)
    x = b.input("x", "float32", [4, 6])
    lo, hi = b.Split(x, np.array([2, 4]), outputs=2, axis=1)
    assert str(lo.type) == "float32[4x2]" and str(hi.type) == "float32[4x4]"
    c = b.Clip(hi, None, np.float32(1.0))
    b.output(lo, c)
    out = gx.Session(b.build()).run({"x": np.arange(24, dtype=np.float32).reshape(4, 6)}).outputs
    np.testing.assert_array_equal(out[c.name], np.minimum(np.arange(24, dtype=np.float32).reshape(4, 6)[:, 2:], 1))


@pytest.mark.parametrize("make,message", [
    (lambda b, x: b.MatMul(x, x), "builder 'g': node matmul (MatMul): Incompatible dimensions for matrix "
                                  "multiplication (inputs float32[2x3], float32[2x3])"),
    (lambda b, x: b.Conv2d(x, x), "builder 'g': node 'conv2d': unknown op 'Conv2d'; closest known: Conv"),
    (lambda b, x: b.LeakyRelu(x, alpah=0.1), "builder 'g': node leakyrelu (LeakyRelu): unknown attribute 'alpah'; "
                                             "LeakyRelu has: alpha"),
    (lambda b, x: b.Gelu(x), "builder 'g': node gelu (Gelu): op 'Gelu' is not in opset 17 (it exists from opset 20)"),
    (lambda b, x: b.Relu("ghost"), "builder 'g': node relu (Relu) reads 'ghost', which is not in the graph yet"),
    (lambda b, x: b.input("x", "float32", [1]), "builder 'g': value name 'x' is empty or already used"),
    (lambda b, x: b.Relu(x, name="r") and b.Relu(x, name="r"), "builder 'g': node name 'r' is used twice"),
    (lambda b, x: b.Relu(gx.GraphBuilder("other").input("y", "float32", [1])),
     "builder 'g': tensor 'y' belongs to another builder"),
    (lambda b, x: b.output("nope"), "builder 'g': output 'nope' is not a value of the graph"),
    (lambda b, x: b.build(), "builder 'g': the graph has no outputs; call output() first"),
])
def test_mistakes_raise_at_once_with_the_exact_message(make, message):
    b = gx.GraphBuilder("g", opset=17)
    x = b.input("x", "float32", [2, 3])
    with pytest.raises(gx.GraphError) as e:
        make(b, x)
    assert str(e.value) == message
    assert all(n.op != "MatMul" for n in b.graph.nodes)  # a rejected op leaves no trace


def test_builder_graph_round_trips_through_yaml_and_onnx_bit_identical():
    b, *_ = mlp(batch=5)
    g = b.build()
    x = np.linspace(-3, 3, 15, dtype=np.float32).reshape(5, 3)
    want = gx.Session(g).run({"x": x}).outputs["y"]
    from_yaml = loads_yaml(yaml_text(yaml_data(g)[0]), "b.yaml")
    from_onnx = gx.load(onnx_model(from_yaml))
    for other in (from_yaml, from_onnx):
        assert other.nodes[0].meta == {"stream_label": "main", "priority": 1}
        assert gx.Session(other).run({"x": x}).outputs["y"].tobytes() == want.tobytes()


def test_generated_names_count_on_and_skip_taken_ones():
    """Fresh names go base, base_1, base_2, ... (counted on, not searched from 0 each time)
    and step over names the user took."""
    b = gx.GraphBuilder("names")
    x = b.input("x", "float32", [2])
    r = b.Relu(b.Relu(x))
    b.op("Relu", r, name="relu_2")
    b.Relu(r)
    assert [n.name for n in b.graph.nodes] == ["relu", "relu_1", "relu_2", "relu_3"]
    assert [n.outputs[0] for n in b.graph.nodes] == ["relu_out", "relu_1_out", "relu_2_out", "relu_3_out"]


def test_a_python_number_takes_the_dtype_of_its_type_variable():
    """Where(c, x, -1.0): the number is Y, which shares T with x (float32), not the bool c."""
    b = gx.GraphBuilder("where")
    c = b.input("c", "bool", [3])
    x = b.input("x", "float32", [3])
    y = b.Where(c, x, -1.0)
    assert y.dtype == np.float32
    b.output(b.Pow(y, 2))   # Pow's exponent has a type of its own: the base's dtype, as before
    got = gx.Session(b.build()).run({"c": np.array([True, False, True]), "x": np.full(3, 3, np.float32)})
    assert got.outputs[b.graph.outputs[0]].tolist() == [9.0, 1.0, 9.0]


def test_a_number_no_tensor_types_keeps_numpy_s_dtype_and_an_inexact_one_is_refused():
    b = gx.GraphBuilder("numbers")
    c = b.input("c", "bool", [2])
    assert b.Where(c, 1.5, -2.0).dtype == np.float64   # c's bool is fixed by the schema: not taken
    x = b.input("x", "uint8", [2])
    assert b.Add(x, 2).dtype == np.uint8
    for bad in (1.5, -1, 256):
        with pytest.raises(gx.GraphError, match=rf"^builder 'numbers': the number {bad!r} cannot be uint8 exactly"):
            b.Add(x, bad)
