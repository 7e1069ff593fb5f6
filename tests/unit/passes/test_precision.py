"""Precision as ATC chooses it: each task's timed dtype and bytes under every mode, the
chips' cube paths, and the device numerics a mode costs, against hand-computed values."""

from __future__ import annotations

import json

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import graphexec as gx
from graphexec.errors import GraphExecError
from graphexec.kernels.precision import round_to
from graphexec.plan import TaskKind
from graphexec.runtime.profiles import load_profile

mk = helper.make_node
RNG = np.random.default_rng(0)
W = RNG.standard_normal((64, 32)).astype(np.float32)
X = {"x": RNG.standard_normal((16, 64)).astype(np.float32)}


def _model(nodes, out_shape=(16, 32)):
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [16, 64])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(out_shape))],
                          [numpy_helper.from_array(W, "w")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


MATMUL_RELU = _model([mk("MatMul", ["x", "w"], ["h"]), mk("Relu", ["h"], ["y"])])
MATMUL_SOFTMAX = _model([mk("MatMul", ["x", "w"], ["h"]), mk("Add", ["h", "h"], ["a"]), mk("Softmax", ["a"], ["y"])])
# bytes: x 16x64, w 64x32, h and y 16x32 (float32: 4 bytes each)
X_B, W_B, H_B = 16 * 64 * 4, 64 * 32 * 4, 16 * 32 * 4


def _plain(device):
    """The chip without its kernel model: no L2 pass, so a task's bytes are what it moves."""
    return load_profile(device).model_copy(update={"kernels": None})


def _tasks(model, device, **kw):
    session = gx.Session(model, device=_plain(device), fusion=False, **kw)
    compiled = session.compile(X)
    return [(t.op, t.kind, t.unit, t.dtype, t.bytes) for t in compiled.tasks.tasks], session


@pytest.mark.parametrize("device", ["ascend910", "ascend310p", "ascend910b"])
def test_the_default_is_force_fp16_on_every_ascend_chip(device):
    tasks, session = _tasks(MATMUL_RELU, device)
    assert session.options.precision_mode == "force_fp16"
    assert tasks == [("MatMul", TaskKind.KERNEL, "cube", "float16", (X_B + W_B + H_B) / 2),
                     ("Relu", TaskKind.KERNEL, "vector", "float16", 2 * H_B / 2)]


def test_each_mode_types_the_cube_and_vector_tasks():
    rows = {}
    for mode in ("allow_fp32_to_fp16", "must_keep_origin_dtype", "force_fp32", "cube_fp16in_fp32out",
                 "allow_mix_precision", "allow_mix_precision_bf16", "allow_fp32_to_bf16"):
        rows[mode] = [t[3:] for t in _tasks(MATMUL_SOFTMAX, "ascend910b", precision_mode=mode)[0]]
    half = (X_B + W_B + H_B) / 2
    assert rows["allow_fp32_to_fp16"] == [("float16", half), ("float32", 3 * H_B), ("float32", 2 * H_B)]
    assert rows["must_keep_origin_dtype"] == [("float32", X_B + W_B + H_B), ("float32", 3 * H_B), ("float32", 2 * H_B)]
    # float16 operands in, float32 out; vector ops already float32 stay so
    fp16_in = [("float16", (X_B + W_B) / 2 + H_B), ("float32", 3 * H_B), ("float32", 2 * H_B)]
    assert rows["force_fp32"] == rows["cube_fp16in_fp32out"] == fp16_in
    # mixed: the Add drops to float16, the Softmax keeps float32
    assert rows["allow_mix_precision"] == [("float16", half), ("float16", 3 * H_B / 2), ("float32", 2 * H_B)]
    assert rows["allow_mix_precision_bf16"] == [("bfloat16", half), ("bfloat16", 3 * H_B / 2), ("float32", 2 * H_B)]
    assert rows["allow_fp32_to_bf16"] == [("bfloat16", half), ("float32", 3 * H_B), ("float32", 2 * H_B)]


@pytest.mark.parametrize("device, aicpu", [("ascend910", True), ("ascend310p", True), ("ascend910b", False)])
def test_a_float32_cube_op_kept_in_float32_runs_where_the_chip_can(device, aicpu):
    """910 and 310P cubes have no float32 path: must_keep_origin_dtype sends it to the AI CPU."""
    tasks, _ = _tasks(MATMUL_RELU, device, precision_mode="must_keep_origin_dtype")
    assert tasks[0][1:4] == ((TaskKind.AICPU, "aicpu", "float32") if aicpu else (TaskKind.KERNEL, "cube", "float32"))


def test_bf16_modes_need_a_chip_with_bfloat16_and_bad_modes_are_one_line():
    with pytest.raises(GraphExecError, match="no bfloat16"):
        gx.Session(MATMUL_RELU, device="ascend310p", precision_mode="allow_mix_precision_bf16")
    with pytest.raises(GraphExecError, match="precision_mode must be one of"):
        gx.Session(MATMUL_RELU, precision_mode="fp8")
    with pytest.raises(GraphExecError, match="precision_numerics"):
        gx.Session(MATMUL_RELU, precision_numerics="gpu")


def test_simulated_time_follows_the_mode():
    big = helper.make_model(helper.make_graph(
        [mk("MatMul", ["a", "b"], ["y"])], "g",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2048, 2048]) for n in ("a", "b")],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2048, 2048])]),
        opset_imports=[helper.make_opsetid("", 17)])
    times = {m: gx.Session(big, device="ascend910b", precision_mode=m).simulate().stats.makespan_us
             for m in ("force_fp16", "must_keep_origin_dtype")}
    # 2*2048^3 flops: compute-bound on 910B's cube, whose float16 peak is twice its float32 one
    assert times["must_keep_origin_dtype"] / times["force_fp16"] == pytest.approx(2.0, rel=0.2)


def test_outputs_are_the_models_unless_device_numerics_are_asked():
    model = _model([mk("MatMul", ["x", "w"], ["y"])])
    exact = X["x"] @ W
    default = gx.Session(model, device="ascend310p").run(X)
    np.testing.assert_allclose(default.outputs["y"], exact, rtol=1e-5, atol=1e-5)
    assert (default.stats.precision_mode, default.stats.precision_computed) == ("force_fp16", "model")
    device = gx.Session(model, device="ascend310p", precision_numerics="device").run(X)
    # float16 operands, float32 accumulation, a float16 result
    f16 = np.float16
    want = (X["x"].astype(f16).astype(np.float32) @ W.astype(f16).astype(np.float32)).astype(f16).astype(np.float32)
    np.testing.assert_allclose(device.outputs["y"], want, rtol=1e-3, atol=1e-3)
    assert np.abs(device.outputs["y"] - exact).max() > 1e-4   # the mode's accuracy cost shows
    assert (device.stats.precision_mode, device.stats.precision_computed) == ("force_fp16", "force_fp16")
    ev = next(e for e in device.trace["traceEvents"] if e.get("cat") == "kernel")
    assert ev["args"]["dtype"] == "float16"


def test_round_to_bfloat16_ties_to_even_and_keeps_nan():
    x = np.array([1.00390625, 1.01171875, -2.0, np.nan, np.inf, 3.0e38], np.float32)
    got = round_to(x, "bfloat16")
    assert got[:3].tolist() == [1.0, 1.015625, -2.0] and np.isnan(got[3]) and got[4] == np.inf
    assert round_to(np.array([70000.0], np.float32), "float16")[0] == np.inf   # past float16's range
    assert round_to(np.array([3], np.int32), "float16").dtype == np.int32


def test_cli_says_which_mode_was_timed_and_computed(tmp_path, capsys):
    from cli import main

    path = tmp_path / "m.onnx"
    path.write_bytes(MATMUL_RELU.SerializeToString())
    assert main(["run", str(path), "--device", "ascend910b", "--precision-mode", "allow_fp32_to_fp16",
                 "--precision-numerics", "device", "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)["stats"]
    assert (stats["precision_mode"], stats["precision_computed"]) == ("allow_fp32_to_fp16", "allow_fp32_to_fp16")
    assert main(["run", str(path)]) == 0
    assert "timed in force_fp16, outputs computed as the model defines them" in capsys.readouterr().out
