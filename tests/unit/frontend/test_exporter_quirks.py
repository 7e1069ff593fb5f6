"""What real exporters write that a hand-made model would not: graphexec reads it as
onnxruntime does."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper

import graphexec as gx
from graphexec.errors import UnsupportedOpError

ort = pytest.importorskip("onnxruntime")


def _paddle_style() -> onnx.ModelProto:
    """Paddle2ONNX writes -1 for every dynamic dim, in inputs, value_info, outputs and
    inside subgraphs."""
    dyn = [-1, 3, -1]
    then_g = helper.make_graph([helper.make_node("Neg", ["r"], ["t"])], "then", [],
                               [helper.make_tensor_value_info("t", T.FLOAT, dyn)])
    else_g = helper.make_graph([helper.make_node("Abs", ["r"], ["e"])], "else", [],
                               [helper.make_tensor_value_info("e", T.FLOAT, dyn)])
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("ReduceSum", ["r"], ["s"], keepdims=0),
             helper.make_node("Greater", ["s", "z"], ["c"]),
             helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)]
    g = helper.make_graph(nodes, "paddle", [helper.make_tensor_value_info("x", T.FLOAT, dyn)],
                          [helper.make_tensor_value_info("y", T.FLOAT, dyn)],
                          [helper.make_tensor("z", T.FLOAT, [], [0.0])],
                          value_info=[helper.make_tensor_value_info("r", T.FLOAT, dyn)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("shape", [(2, 3, 5), (1, 3, 1), (4, 3, 7)])
def test_minus_one_dims_are_dynamic_like_onnxruntime(shape):
    model = _paddle_style()
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    ours = gx.Session(gx.load(model)).run({"x": x}).outputs["y"]
    ref = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_array_equal(ours, ref)


def test_minus_one_dim_reads_as_unknown():
    graph = gx.load(_paddle_style())
    assert graph.values["x"].type.shape == (None, 3, None)


def test_question_mark_dims_are_each_their_own_unknown():
    """Paddle2ONNX also writes dim_param "?" for every unknown dim: two of them are not the
    same size (onnxruntime does not bind them together either)."""
    x = helper.make_tensor_value_info("x", T.FLOAT, ["?", 3, "?"])
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x],
                          [helper.make_tensor_value_info("y", T.FLOAT, ["?", 3, "?"])])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    x = np.arange(2 * 3 * 5, dtype=np.float32).reshape(2, 3, 5) - 10
    np.testing.assert_array_equal(gx.Session(gx.load(model)).run({"x": x}).outputs["y"], np.maximum(x, 0))


def test_other_negative_dims_are_still_refused():
    model = _paddle_style()
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_value = -2
    with pytest.raises(gx.errors.ModelLoadError, match=r"declares dim 0 as -2; dims must be >= 0 \(or -1"):
        gx.load(model)


def test_cli_runs_a_minus_one_model_with_default_feeds(tmp_path):
    import subprocess
    import sys

    path = tmp_path / "paddle.onnx"
    onnx.save(_paddle_style(), str(path))
    proc = subprocess.run([sys.executable, "cli.py", "run", str(path)], capture_output=True, text=True,
                          cwd=str(gx.__path__[0].rsplit("/", 1)[0]))
    assert proc.returncode == 0, proc.stderr
    assert "y" in proc.stdout


def test_an_op_nothing_can_run_fails_at_compile_not_at_the_first_run():
    """onnx.reference has no MaxRoiPool at all (and DequantizeLinear only from opset 19):
    the schema alone must not make the fallback accept a node it cannot run."""
    node = helper.make_node("MaxRoiPool", ["x", "r"], ["y"], name="pool", pooled_shape=[2, 2])
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", T.FLOAT, [1, 1, 4, 4]),
                                        helper.make_tensor_value_info("r", T.FLOAT, [1, 5])],
                          [helper.make_tensor_value_info("y", T.FLOAT, None)])
    session = gx.Session(gx.load(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])))
    with pytest.raises(UnsupportedOpError, match=r"node pool \(MaxRoiPool\): no kernel or fallback knows op "):
        session.compile()


def test_function_ops_still_fall_back_by_expansion():
    """MeanVarianceNormalization has no reference class, but its schema's function body
    does: the reference expands it, so it stays runnable."""
    x = np.random.default_rng(1).standard_normal((2, 3, 4, 4)).astype(np.float32)
    node = helper.make_node("MeanVarianceNormalization", ["x"], ["y"])
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", T.FLOAT, x.shape)],
                          [helper.make_tensor_value_info("y", T.FLOAT, x.shape)])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    ours = gx.Session(gx.load(model)).run({"x": x}).outputs["y"]
    ref = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(ours, ref, rtol=1e-5, atol=1e-5)
