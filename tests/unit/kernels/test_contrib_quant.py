"""onnxruntime's quantized com.microsoft ops against onnxruntime itself, and the cost of
quantized cube ops (simulated at the int8 cube rate)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from test_quant import MS, RNG, check, f, one_node, pos, q, run_ort, run_ours, u8s8

import graphexec as gx
from graphexec.runtime.profiles import load_profile

T8 = [np.uint8, np.int8]


def zp(dtype, value: int = 3) -> np.ndarray:
    """A zero point; for int8 the uint8 ``value`` shifted by -128."""
    return np.array(value if dtype is np.uint8 else value - 128, dtype)


@pytest.mark.parametrize("op", ["QLinearAdd", "QLinearMul"])
@pytest.mark.parametrize("dtype", T8)
@pytest.mark.parametrize("sa,sb", [((3, 4, 5), (3, 4, 5)), ((2, 3, 4), (4,)), ((1, 4), (3, 1))])
def test_qlinear_binary(op, dtype, sa, sb):
    a, b = q(sa, dtype), q(sb, dtype)
    inputs = [a, np.array(0.05, np.float32), zp(dtype, 120), b, np.array(0.02, np.float32), zp(dtype, 9),
              np.array(0.07 if op == "QLinearAdd" else 0.4, np.float32), zp(dtype, 100)]
    check(op, inputs, domain=MS)
    same_as_omitted(op, inputs)


@pytest.mark.parametrize("op", ["QLinearAdd", "QLinearMul"])
@pytest.mark.parametrize("seed", range(6))
def test_qlinear_binary_every_byte_pair_with_random_scales(op, seed):
    """All 65,536 (a, b) pairs: MLAS adds the output zero point before rounding, and in
    float32 that sum can land on a tie that rounding first would not (seed 4 of QLinearAdd
    found one)."""
    rng = np.random.default_rng(seed)
    sa, sb, sc = (np.array(v, np.float32) for v in rng.uniform(0.001, 0.1, 3))
    za, zb, zc = (np.array(v, np.uint8) for v in rng.integers(0, 255, 3))
    a = np.tile(np.arange(256, dtype=np.uint8), 256)
    b = np.repeat(np.arange(256, dtype=np.uint8), 256)
    check(op, [a, sa, za, b, sb, zb, sc, zc], domain=MS)


def same_as_omitted(op: str, inputs: list, attrs: dict | None = None) -> None:
    """Omitted zero points are 0 (onnxruntime's type inference rejects the omission itself)."""
    zeros = [np.zeros_like(x) if i in (2, 5, 7) else x for i, x in enumerate(inputs)]
    dropped = [None if i in (2, 5, 7) else x for i, x in enumerate(inputs)]
    np.testing.assert_array_equal(run_ours(one_node(op, dropped, attrs, domain=MS), dropped)[0],
                                  run_ort(one_node(op, zeros, attrs, domain=MS), zeros)[0])


@pytest.mark.parametrize("dtype", T8)
@pytest.mark.parametrize("op,attrs", [("QLinearSigmoid", {}), ("QLinearLeakyRelu", {}),
                                      ("QLinearLeakyRelu", {"alpha": 0.3})])
def test_qlinear_unary_tables(op, dtype, attrs):
    x = np.arange(256, dtype=np.uint8).view(dtype).reshape(4, 64)
    params = [np.array(0.07, np.float32), zp(dtype, 128), np.array(1 / 256 if op == "QLinearSigmoid" else 0.05,
                                                                    np.float32), zp(dtype, 0)]
    check(op, [x] + params, attrs, domain=MS)
    inputs = [x] + params
    zeros = [np.zeros_like(v) if i in (2, 4) else v for i, v in enumerate(inputs)]
    dropped = [None if i in (2, 4) else v for i, v in enumerate(inputs)]
    np.testing.assert_array_equal(run_ours(one_node(op, dropped, attrs, domain=MS), dropped)[0],
                                  run_ort(one_node(op, zeros, attrs, domain=MS), zeros)[0])


@pytest.mark.parametrize("dtype", T8)
@pytest.mark.parametrize("axis", [1, -1])
def test_qlinear_concat(dtype, axis):
    """Three inputs: one already at Y's scale and zero point (copied), two requantized."""
    ys, yz = np.array(0.1, np.float32), zp(dtype, 128)
    parts = [q((2, 3, 4), dtype), ys, yz, q((2, 3, 4), dtype), np.array(0.3, np.float32), zp(dtype, 50),
             q((2, 3, 4), dtype), np.array(0.01, np.float32), zp(dtype, 200)]
    check("QLinearConcat", [ys, yz] + parts, {"axis": axis}, domain=MS)


@pytest.mark.parametrize("dtype", T8)
@pytest.mark.parametrize("last", [0, 1])
@pytest.mark.parametrize("shape", [(2, 5, 7, 6), (1, 3, 10), (1, 8, 1, 1)])
def test_qlinear_global_average_pool(dtype, last, shape):
    inputs = [q(shape, dtype), np.array(0.05, np.float32), zp(dtype, 100), np.array(0.03, np.float32),
              zp(dtype, 110)]
    check("QLinearGlobalAveragePool", inputs, {"channels_last": last}, domain=MS)


POOLS = [
    {"kernel_shape": [3, 3]},
    {"kernel_shape": [3, 2], "strides": [2, 1], "pads": [1, 0, 1, 1]},
    {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "count_include_pad": 1},
    {"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1},
    {"kernel_shape": [3, 3], "auto_pad": "SAME_UPPER"},
]


@pytest.mark.parametrize("dtype", T8)
@pytest.mark.parametrize("attrs", POOLS)
@pytest.mark.parametrize("last", [0, 1])
def test_qlinear_average_pool(dtype, attrs, last):
    """Bit-exact: the window sums run in onnxruntime's order (float32 sums depend on it)."""
    x = q((2, 3, 7, 8), dtype)
    if last:
        x = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    inputs = [x, np.array(0.05, np.float32), zp(dtype, 100), np.array(0.04, np.float32), zp(dtype, 90)]
    check("QLinearAveragePool", inputs, {**attrs, "channels_last": last}, domain=MS)


@pytest.mark.parametrize("dtype", T8)
@pytest.mark.parametrize("attrs", [{"axis": -1, "opset": 13}, {"axis": 1, "opset": 13}, {"axis": 1, "opset": 12}])
def test_qlinear_softmax(dtype, attrs):
    """Bit-exact on these inputs, though onnxruntime takes exp() from its own lookup table."""
    inputs = [q((2, 5, 6), dtype), np.array(0.1, np.float32), zp(dtype, 128), np.array(1 / 256, np.float32),
              zp(dtype, 0)]
    check("QLinearSoftmax", inputs, attrs, domain=MS)


# -- GEMMs ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("ta,tb", [(np.uint8, np.uint8), (np.uint8, np.int8), (np.int8, np.int8)])
@pytest.mark.parametrize("trans_a,trans_b", [(0, 0), (1, 0), (0, 1)])
@pytest.mark.parametrize("per_column", [False, True])
def test_qgemm(ta, tb, trans_a, trans_b, per_column):
    m, k, n = 5, 33, 7
    a = q((k, m) if trans_a else (m, k), ta)
    b = u8s8(q((n, k) if trans_b else (k, n), tb), ta)
    bs, bz = (pos(n), q((n,), tb) if tb is np.uint8 else np.zeros(n, tb)) if per_column else \
        (np.array(0.03, np.float32), zp(tb, 4))
    head = [a, np.array(0.02, np.float32), zp(ta, 7), b, bs, bz]
    c = RNG.integers(-5000, 5000, (n,)).astype(np.int32)
    attrs = {"transA": trans_a, "transB": trans_b, "alpha": 0.75}
    check("QGemm", head, attrs, domain=MS, rtol=1e-6)                                 # float out
    check("QGemm", head + [c], attrs, domain=MS, rtol=1e-6)
    check("QGemm", head + [c, np.array(0.5, np.float32), zp(ta, 100)], attrs, domain=MS)   # quantized out
    check("QGemm", head + [None, np.array(0.5, np.float32), zp(ta, 100)], attrs, domain=MS)


@pytest.mark.parametrize("ta,tb", [(np.uint8, np.uint8), (np.uint8, np.int8), (np.int8, np.int8)])
@pytest.mark.parametrize("per_column", [False, True])
def test_matmul_integer_to_float(ta, tb, per_column):
    a, b = q((2, 4, 30), ta), u8s8(q((30, 6), tb), ta)
    bs, bz = (pos(6), q((6,), tb)) if per_column else (np.array(0.03, np.float32), zp(tb, 2))
    a_s = np.array(0.02, np.float32)
    check("MatMulIntegerToFloat", [a, b, a_s, bs], domain=MS, rtol=1e-6)
    check("MatMulIntegerToFloat", [a, b, a_s, bs, zp(ta, 9), bz, f(6)], domain=MS, rtol=1e-6)
    check("MatMulIntegerToFloat", [a, b, a_s.astype(np.float16), bs.astype(np.float16), zp(ta, 9), bz,
                                   f(6).astype(np.float16)], domain=MS, rtol=1e-3)


@pytest.mark.parametrize("tb", T8)
@pytest.mark.parametrize("per_column", [False, True])
def test_dynamic_quantize_matmul(tb, per_column):
    a, b = f(3, 5, 40), u8s8(q((40, 8), tb))   # a is quantized to uint8 by the op
    bs, bz = (pos(8), q((8,), tb) if tb is np.uint8 else np.zeros(8, tb)) if per_column else \
        (np.array(0.03, np.float32), zp(tb, 6))
    check("DynamicQuantizeMatMul", [a, b, bs], domain=MS, rtol=1e-6)
    check("DynamicQuantizeMatMul", [a, b, bs, bz, f(8)], domain=MS, rtol=1e-6)
    check("DynamicQuantizeMatMul", [-np.abs(a), b, bs, bz], domain=MS, rtol=1e-6)


def pack(values: np.ndarray, bits: int) -> np.ndarray:
    """Pack unsigned ``bits``-wide values along the last axis, least significant first."""
    stream = ((values[..., None] >> np.arange(bits)) & 1).astype(np.uint8)
    return np.packbits(stream.reshape(values.shape[:-1] + (-1,)), axis=-1, bitorder="little")


@pytest.mark.parametrize("bits,block", [(4, 16), (4, 32), (8, 32), (4, 128), (2, 16)])
@pytest.mark.parametrize("zps", ["none", "packed", "float"])
@pytest.mark.parametrize("k", [64, 72])
def test_matmul_nbits(bits, block, zps, k):
    """Weights as initializers (onnxruntime prepacks them); K not a multiple of the block too."""
    if bits != 4 and zps == "float":
        pytest.skip("onnxruntime's CPU kernel takes float zero points with 4-bit weights only")
    n, kb = 12, -(-k // block)
    qw = RNG.integers(0, 1 << bits, (n, kb * block))
    b = pack(qw.reshape(n, kb, block), bits)
    scales = pos(n, kb)
    inputs = [f(3, 2, k, scale=1.0), b, scales]
    if zps == "packed":
        inputs.append(pack(RNG.integers(0, 1 << bits, (n, kb)), bits))
    elif zps == "float":
        inputs.append(RNG.uniform(0, (1 << bits) - 1, (n, kb)).astype(np.float32))
    attrs = {"K": k, "N": n, "bits": bits, "block_size": block}
    const = tuple(range(1, len(inputs)))
    check("MatMulNBits", inputs, attrs, domain=MS, const=const, rtol=1e-4)
    check("MatMulNBits", inputs + [None] * (5 - len(inputs)) + [f(n)], attrs, domain=MS, const=const, rtol=1e-4)


def test_matmul_nbits_float16():
    n, k, block = 8, 64, 32
    b = pack(RNG.integers(0, 16, (n, 2, block)), 4)
    inputs = [f(4, k, scale=1.0).astype(np.float16), b, pos(n, 2).astype(np.float16)]
    check("MatMulNBits", inputs, {"K": k, "N": n, "bits": 4, "block_size": block}, domain=MS, const=(1, 2),
          rtol=2e-2)


# -- cost: quantized cube ops run at the int8 rate -------------------------------------------------------

M = N = 1024
K = 4096   # compute-bound on ascend910 at every rate here (bytes / bandwidth well under flops / peak)


def _gemm_model(op: str, a_type: int, consts: list, domain: str = "") -> onnx.ModelProto:
    names = ["a"] + [c.name for c in consts]
    node = helper.make_node(op, names, ["y"], domain=domain)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("a", a_type, [M, K])],
                              [onnx.ValueInfoProto(name="y")], consts)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid(MS, 1)])
    model.ir_version = 10
    return model


# the plain roofline (no kernel model, test_kernel_time.py): time is work over the unit's peak
PLAIN = load_profile("ascend910").model_copy(update={"kernels": None})


def _task_time(model: onnx.ModelProto, x: np.ndarray) -> tuple[str, float, float]:
    """(compute dtype, kernel time in us, task overhead in us) of the model's one kernel."""
    session = gx.Session(gx.load(model), device=PLAIN)
    res = session.run({"a": x})
    (task,) = [t for t in session.compiled.tasks.tasks if t.unit == "cube"]
    (ev,) = [e for e in res.trace["traceEvents"] if e.get("cat") == "kernel"]
    return task.dtype, ev["dur"], session.profile.task_overhead_us


def test_quantized_gemms_run_at_the_int8_cube_rate():
    """QLinearMatMul (uint8 out), MatMulInteger (int32 out) and MatMulIntegerToFloat (float
    out) are int8 cube tasks: their time is 2·M·N·K at the int8 peak, and a float32 MatMul
    of the same shape takes int8/float32 peak (4x on ascend910) longer."""
    c = lambda name, v: numpy_helper.from_array(np.asarray(v), name)  # noqa: E731
    w8 = c("w", q((K, N), np.int8))
    models = {
        "QLinearMatMul": _gemm_model("QLinearMatMul", TensorProto.UINT8, [
            c("as", np.float32(0.02)), c("az", np.uint8(3)), w8, c("ws", np.float32(0.01)), c("wz", np.int8(0)),
            c("ys", np.float32(40.0)), c("yz", np.uint8(7))]),
        "MatMulInteger": _gemm_model("MatMulInteger", TensorProto.UINT8, [w8]),
        "MatMulIntegerToFloat": _gemm_model("MatMulIntegerToFloat", TensorProto.UINT8,
                                            [w8, c("as", np.float32(0.02)), c("ws", np.float32(0.01))], MS),
    }
    profile = PLAIN
    flops = 2.0 * M * N * K
    int8_us = flops / (profile.peak_tflops.cube["int8"] * 1e6)
    x = q((M, K))
    for op, model in models.items():
        dtype, dur, overhead = _task_time(model, x)
        assert dtype == "int8", op
        assert dur - overhead == pytest.approx(int8_us, rel=1e-3), op
    fp32 = _gemm_model("MatMul", TensorProto.FLOAT, [c("w", f(K, N))])
    dtype, dur, overhead = _task_time(fp32, f(M, K))   # float32 runs in float16: ATC's default force_fp16
    ratio = profile.peak_tflops.cube["int8"] / profile.peak_tflops.cube["float16"]
    assert dtype == "float16" and (dur - overhead) == pytest.approx(ratio * int8_us, rel=1e-3)


def test_cube_cost_of_contrib_gemms():
    """M, N, K of the com.microsoft GEMMs and QLinearConv (its filter is input 3)."""
    from graphexec.kernels.cost import cube_dtype, node_cost

    def flops(op, ins, out, **attrs):
        cost = node_cost(op, ins, 0, [out], 0, attrs, False, MS)
        assert cost.unit == "cube", op
        return cost.flops

    assert flops("QGemm", [(64, 32), (), (), (32, 16)], (64, 16)) == 2 * 64 * 16 * 32
    assert flops("QGemm", [(32, 64), (), (), (16, 32)], (64, 16), transA=1, transB=1) == 2 * 64 * 16 * 32
    assert flops("MatMulNBits", [(2, 5, 96), (48, 3, 16), (48, 3)], (2, 5, 48)) == 2 * 10 * 48 * 96
    assert flops("DynamicQuantizeMatMul", [(7, 40), (40, 8), ()], (7, 8)) == 2 * 7 * 8 * 40
    assert flops("MatMulIntegerToFloat", [(7, 40), (40, 8), (), ()], (7, 8)) == 2 * 7 * 8 * 40
    qconv = [(1, 4, 9, 9), (), (), (6, 4, 3, 3), (), (), (), (), (6,)]
    assert flops("QLinearConv", qconv, (1, 6, 7, 7)) == 2 * 49 * 6 * 36
    assert flops("QLinearConv", qconv, (1, 7, 7, 6), channels_last=1) == 2 * 49 * 6 * 36
    assert cube_dtype("DynamicQuantizeMatMul", ["float32", "int8", "float32"], {}) == "int8"
    assert cube_dtype("MatMulNBits", ["float16", "uint8", "float16"], {}) == "float16"
    assert cube_dtype("MatMulNBits", ["float32", "uint8", "float32"], {"accuracy_level": 4}) == "int8"
    assert cube_dtype("MatMul", ["float16", "float16"], {}) == "float16"
