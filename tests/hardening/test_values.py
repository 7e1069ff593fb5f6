"""Odd values that are not errors: NaN and Inf flow through as IEEE says, zero-size dims run."""

from __future__ import annotations

import json

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import graphexec as gx
from hardening import bad_inputs as B
from hardening.test_corpus import ROOT, run_cli

SPECIAL = np.array([[np.nan, np.inf, -np.inf], [1.5, -0.0, -2.0]], np.float32)
mk = helper.make_node


def _reference(model, feeds: dict) -> list[np.ndarray]:
    return ReferenceEvaluator(model).run(None, feeds)


@pytest.mark.parametrize("name", [n for n in B.small_models() if n != "conv"])
def test_nan_and_inf_propagate_like_the_reference(name):
    model = B.small_models()[name]
    got = gx.Session(gx.load(model)).run({"x": SPECIAL}).outputs
    for out, want in zip(got.values(), _reference(model, {"x": SPECIAL})):
        np.testing.assert_allclose(out, want, rtol=1e-6, equal_nan=True)
    assert any(np.isnan(v).any() for v in got.values())


def test_nan_propagates_through_conv_and_max_pool(recwarn):
    """Every 3x3 window of the 2x3 image meets the NaN or inf + -inf, so the Conv is all NaN,
    and so is each MaxPool window (NaN propagates, as numpy's and PyTorch's max do; the onnx
    reference's MaxPool fails on NaN and onnxruntime's mixes NaN and -FLT_MAX), quietly."""
    got = gx.Session(gx.load(B.small_models()["conv"])).run({"x": SPECIAL}).outputs["y"]
    assert got.shape == (2, 3) and np.isnan(got).all()
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]


def test_max_pool_propagates_nan_and_ignores_padding():
    x = np.array([[[[1.0, np.nan, 3.0], [-np.inf, -5.0, 2.0], [4.0, 0.0, -1.0]]]], np.float32)
    node = mk("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], pads=[1, 1, 0, 0])
    model = helper.make_model(helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 3, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]), opset_imports=[helper.make_opsetid("", 17)])
    got = gx.Session(model).run({"x": x}).outputs["y"][0, 0]
    np.testing.assert_array_equal(got, [[1, np.nan, np.nan], [1, np.nan, np.nan], [4, 4, 2]])


def test_nan_and_inf_through_the_command_line(tmp_path, capsys):
    np.save(tmp_path / "x.npy", SPECIAL)
    model = B.write(tmp_path, "relu.onnx", B.relu_model())
    rc, out, err = run_cli(["run", model, "--input", f"x={tmp_path / 'x.npy'}", "--save", tmp_path / "o.npz",
                            "--json"], capsys)
    assert rc == 0, err
    y = np.load(tmp_path / "o.npz")["y"]
    np.testing.assert_array_equal(y, np.array([[np.nan, np.inf, 0], [1.5, 0, 0]], np.float32))
    assert json.loads(out)["outputs"]["y"]["shape"] == [2, 3]  # NaN in "head" still prints as JSON


ZERO_OPS = {
    "Relu": [mk("Relu", ["x"], ["y"])],
    "Add": [mk("Add", ["x", "x"], ["y"])],
    "Softmax": [mk("Softmax", ["x"], ["y"], axis=1)],
    "LogSoftmax": [mk("LogSoftmax", ["x"], ["y"], axis=0)],
    "MatMul": [mk("MatMul", ["x", "w"], ["y"])],
    "Concat": [mk("Concat", ["x", "x"], ["y"], axis=0)],
    "Transpose": [mk("Transpose", ["x"], ["y"])],
    "ReduceSum": [mk("ReduceSum", ["x", "axes"], ["y"], keepdims=1)],
    "Where": [mk("Greater", ["x", "x"], ["c"]), mk("Where", ["c", "x", "x"], ["y"])],
}


@pytest.mark.parametrize("shape", [[0, 3], [2, 0], [0, 0]], ids=str)
@pytest.mark.parametrize("op", list(ZERO_OPS))
def test_zero_size_dims_run(op, shape):
    inits = [numpy_helper.from_array(np.ones((shape[1], 4), np.float32), "w"),
             numpy_helper.from_array(np.array([1], np.int64), "axes")]
    used = {i for n in ZERO_OPS[op] for i in n.input}
    g = helper.make_graph(ZERO_OPS[op], "g", [helper.make_tensor_value_info("x", 1, shape)],
                          [helper.make_tensor_value_info("y", 1, None)], [t for t in inits if t.name in used])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    x = np.zeros(shape, np.float32)
    y = gx.Session(gx.load(model)).run({"x": x}).outputs["y"]
    want = _reference(model, {"x": x})[0]
    assert (y.shape, y.dtype) == (want.shape, want.dtype)
    np.testing.assert_array_equal(y, want)


def test_zero_batch_of_a_conv_model(capsys):
    rc, out, err = run_cli(["run", ROOT / "models" / "inception_block.onnx", "--shape", "data=0,192,28,28",
                            "--json"], capsys)
    assert rc == 0, err
    assert json.loads(out)["outputs"]["out"]["shape"] == [0, 256, 28, 28]
