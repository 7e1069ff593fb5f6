"""Quantize/Dequantize and the ONNX integer GEMMs against onnxruntime (the oracle), and
onnx's reference where onnxruntime has no kernel (opsets 23+, 2-bit and float4 types)."""

from __future__ import annotations

from typing import Any, Sequence

import ml_dtypes
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import graphexec as gx

RNG = np.random.default_rng(3)
MS = "com.microsoft"
I4, U4, I2, U2 = ml_dtypes.int4, ml_dtypes.uint4, ml_dtypes.int2, ml_dtypes.uint2
F8 = [ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e4m3fnuz, ml_dtypes.float8_e5m2, ml_dtypes.float8_e5m2fnuz]


def one_node(op: str, inputs: Sequence[np.ndarray | None], attrs: dict[str, Any] | None = None, opset: int = 21,
             domain: str = "", const: Sequence[int] = (), num_outputs: int = 1,
             cast: int | None = None) -> onnx.ModelProto:
    """A one-node model; inputs listed in ``const`` are initializers and ``cast`` appends a
    Cast of output 0 (onnxruntime's python API can neither feed nor return ml_dtypes arrays)."""
    names = [f"x{i}" if x is not None else "" for i, x in enumerate(inputs)]
    outs = [f"y{i}" for i in range(num_outputs)]
    nodes = [helper.make_node(op, names, outs, domain=domain, **(attrs or {}))]
    if cast is not None:
        nodes.append(helper.make_node("Cast", ["y0"], ["c0"], to=cast))
        outs = ["c0"] + outs[1:]
    ins = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(x.dtype), x.shape)
           for i, (n, x) in enumerate(zip(names, inputs)) if n and x is not None and i not in const]
    inits = [numpy_helper.from_array(x, n) for i, (n, x) in enumerate(zip(names, inputs)) if n and i in const]
    graph = helper.make_graph(nodes, "g", ins, [onnx.ValueInfoProto(name=o) for o in outs], inits)
    opsets = [helper.make_opsetid("", opset)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 10
    return model


def _feeds(model: onnx.ModelProto, inputs: Sequence[np.ndarray | None]) -> dict[str, np.ndarray]:
    declared = {i.name for i in model.graph.input}
    return {f"x{i}": x for i, x in enumerate(inputs) if f"x{i}" in declared}


def run_ort(model: onnx.ModelProto, inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, _feeds(model, inputs))


def run_ref(model: onnx.ModelProto, inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
    return list(ReferenceEvaluator(model).run(None, _feeds(model, inputs)))


def run_ours(model: onnx.ModelProto, inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
    """Outputs by graphexec; asserts that every node ran its own kernel, not the fallback,
    and that each output came out as its inferred type said (com.microsoft's shape rules)."""
    session = gx.Session(gx.load(model))
    res = session.run(_feeds(model, inputs)).outputs
    fell = [r.node.op for r in session.compiled.state.runners.values() if getattr(r, "uses_fallback", False)]
    assert not fell, f"ran through the reference fallback: {fell}"
    outs = [np.asarray(res[o.name]) for o in model.graph.output]
    for o, y in zip(model.graph.output, outs):
        t = session.compiled.graph.values[o.name].type
        assert t.is_static, f"{o.name}: no static type was inferred ({t})"
        assert (t.dtype, tuple(t.shape or ())) == (y.dtype, y.shape), f"{o.name}: inferred {t}, got {y.dtype}{y.shape}"
    return outs


def check(op: str, inputs: Sequence[np.ndarray | None], attrs: dict[str, Any] | None = None, opset: int = 21,
          domain: str = "", const: Sequence[int] = (), num_outputs: int = 1, oracle: str = "ort",
          cast: int | None = None, steps: int = 0, rtol: float = 0.0) -> list[np.ndarray]:
    """Ours against the oracle: same dtype and shape; integers within ``steps``, floats within ``rtol``.

    ``cast`` casts the oracle's output 0 (onnxruntime returns no ml_dtypes arrays) and
    ours is compared as that same type.
    """
    ours = run_ours(one_node(op, inputs, attrs, opset, domain, const, num_outputs), inputs)
    model = one_node(op, inputs, attrs, opset, domain, const, num_outputs, cast)
    want = run_ort(model, inputs) if oracle == "ort" else run_ref(model, inputs)
    for i, (o, w) in enumerate(zip(ours, want)):
        if i == 0 and cast is not None:
            o = o.astype(helper.tensor_dtype_to_np_dtype(cast))
        w = np.asarray(w)
        assert o.shape == w.shape and o.dtype == w.dtype, f"{op}: {o.dtype}{o.shape} != {w.dtype}{w.shape}"
        if o.dtype.kind in "iu":
            diff = np.abs(o.astype(np.int64) - w.astype(np.int64))
            assert diff.max(initial=0) <= steps, f"{op}: {int((diff > 0).sum())} values differ, by up to {diff.max()}"
        else:
            # normwise as well as elementwise: a dot product's rounding is relative to its terms, so an
            # output that cancels to near zero may move by rtol of the tensor's peak (BLAS kernels differ)
            peak = float(np.nanmax(np.abs(w), initial=0.0, where=np.isfinite(w)))
            np.testing.assert_allclose(o.astype(np.float64), w.astype(np.float64), rtol=rtol, atol=rtol * peak,
                                       err_msg=op)
    return ours


def q(shape: Sequence[int], dtype: Any = np.uint8) -> np.ndarray:
    lo, hi = (-128, 128) if np.dtype(dtype) == np.int8 else (0, 256)
    return RNG.integers(lo, hi, tuple(shape)).astype(dtype)


def u8s8(b: np.ndarray, a_dtype: Any = np.uint8) -> np.ndarray:
    """int8 weights for a uint8 activation, halved into [-64, 63]. onnxruntime's u8s8 GEMM on x86
    CPUs without VNNI adds pairs of uint8 x int8 products in saturating int16 (VPMADDUBSW), so with
    full-range weights its result depends on the CPU (its quantization tools' reduce_range exists for
    this); with |b| <= 64 a pair is at most 255 * 64 * 2 = 32640 < 2**15 and the oracle is exact on
    every CPU. Full-range u8s8 products are tested against exact int64 arithmetic instead."""
    if np.dtype(a_dtype) != np.uint8 or b.dtype != np.int8:
        return b
    return (b.astype(np.int16) // 2).astype(np.int8)


def f(*shape: int, scale: float = 10.0) -> np.ndarray:
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


def pos(*shape: int) -> np.ndarray:
    return RNG.uniform(0.01, 0.2, shape).astype(np.float32)


# -- QuantizeLinear / DequantizeLinear ------------------------------------------------------------------

# x, scale, zero point (None: omitted), attrs; per tensor, per axis (negative axis too), blocked
LAYOUTS = [
    ((3, 4, 5), (), {}),
    ((3, 4, 5), (4,), {"axis": 1}),
    ((3, 4, 5), (5,), {"axis": -1}),
    ((3, 4, 5), (3,), {"axis": -3}),
    ((6, 5), (3, 5), {"axis": 0, "block_size": 2}),
    ((4, 7), (4, 3), {"axis": -1, "block_size": 3}),     # the last block is short
]


@pytest.mark.parametrize("xs,ss,attrs", LAYOUTS)
@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.uint16, np.int16])
def test_quantize_layouts(xs, ss, attrs, dtype):
    x = f(*xs, scale=300.0 if np.dtype(dtype).itemsize == 1 else 3e4)
    zp = RNG.integers(-5, 6, ss).astype(dtype) if np.dtype(dtype).kind == "i" else RNG.integers(0, 9, ss).astype(dtype)
    check("QuantizeLinear", [x, pos(*ss) if ss else np.array(2.5, np.float32), zp], attrs)
    check("DequantizeLinear", [q(xs, np.int8 if np.dtype(dtype).kind == "i" else np.uint8).astype(dtype),
                               pos(*ss) if ss else np.array(0.3, np.float32), zp], attrs)


@pytest.mark.parametrize("opset", [10, 13, 19, 21])
def test_quantize_opsets_zero_point_omitted_and_ties(opset):
    x = np.array([[0.5, 1.5, 2.5, -0.5, -1.5, -2.5], [300.0, -300.0, np.nan, np.inf, -np.inf, 127.5]], np.float32)
    for zp in (None, np.array(3, np.uint8), np.array(-3, np.int8)):
        check("QuantizeLinear", [x, np.array(1.0, np.float32), zp], opset=opset)
        if zp is not None:
            check("DequantizeLinear", [q((2, 6), zp.dtype), np.array(0.25, np.float32), zp], opset=opset)
    check("DequantizeLinear", [q((2, 6)), np.array(0.25, np.float32)], opset=opset)
    check("DequantizeLinear", [RNG.integers(-2**20, 2**20, (7,)).astype(np.int32), np.array(0.5, np.float32)],
          opset=opset)
    if opset >= 13:
        check("QuantizeLinear", [x, np.array([1.0, 0.5], np.float32), np.array([1, 2], np.uint8)], {"axis": 0},
              opset=opset)


def test_quantize_float16_and_bfloat16():
    """float16 and bfloat16 divide in float32, as onnxruntime does for float16. onnx's
    reference divides bfloat16 in bfloat16, whose rounded quotient can land one step away."""
    x = f(50, 40, scale=40.0).astype(np.float16)
    check("QuantizeLinear", [x, np.array(0.3, np.float16), np.array(0, np.int8)])
    check("DequantizeLinear", [q((5, 4), np.int8), np.array([0.1, 0.2, 0.3, 0.4], np.float16),
                               np.array([1, 2, 3, 4], np.int8)])
    bf = ml_dtypes.bfloat16
    check("QuantizeLinear", [x.astype(bf), np.array(0.3, bf), np.array(0, np.int8)], oracle="ref", steps=1)
    check("DequantizeLinear", [q((5, 4), np.int8), np.array(0.3, bf), np.array(1, np.int8)], oracle="ref")


@pytest.mark.parametrize("xs,ss,attrs", LAYOUTS)
@pytest.mark.parametrize("dtype", [I4, U4])
def test_quantize_int4(xs, ss, attrs, dtype):
    """int4 tensors: initializers and a Cast to int8 on onnxruntime's side."""
    x, s = f(*xs), pos(*ss) if ss else np.array(0.7, np.float32)
    zp = RNG.integers(-2, 3, ss).astype(dtype) if dtype is I4 else RNG.integers(0, 4, ss).astype(dtype)
    check("QuantizeLinear", [x, s, zp], attrs, const=(2,), cast=TensorProto.INT8)
    xq = RNG.integers(-8, 8, xs).astype(dtype) if dtype is I4 else RNG.integers(0, 16, xs).astype(dtype)
    check("DequantizeLinear", [xq, s, zp], attrs, const=(0, 2))


@pytest.mark.parametrize("dtype", F8)
@pytest.mark.parametrize("saturate", [1, 0])
def test_quantize_float8(dtype, saturate):
    x = np.array([1.5, -300, 500, np.nan, np.inf, -np.inf, 449, 464, 465, 0.001, -0.0, 57344, 1e6, 3e-5],
                 np.float32)
    x = np.concatenate([x, f(200, scale=100.0)])
    check("QuantizeLinear", [x, np.array(1, np.float32), np.array(0, dtype)], {"saturate": saturate}, opset=19,
          const=(2,), cast=TensorProto.FLOAT)
    check("DequantizeLinear", [x.astype(dtype), np.array(2, np.float32)], opset=19, const=(0,))


def test_quantize_e5m2_overflow_without_saturation_is_inf():
    """Between 57344 and the e5m2 midpoint to 65536 onnxruntime gives NaN; the spec (and
    onnx's reference, ml_dtypes' cast) give inf, which we follow."""
    inputs = [np.array([61440.0, 61441.0, -62000.0], np.float32), np.array(1, np.float32), np.array(0, F8[2])]
    (y,) = run_ours(one_node("QuantizeLinear", inputs, {"saturate": 0}, const=(2,)), inputs)
    assert y.astype(np.float32).tolist() == [np.inf, np.inf, -np.inf]


@pytest.mark.parametrize("opset", [23, 25])
def test_quantize_new_opsets_against_reference(opset):
    """Opsets 23+ (output_dtype, precision, int2, float4e2m1) are not in onnxruntime yet."""
    x, s = f(4, 6, scale=3.0), pos(4, 2)
    blocked = {"axis": 1, "block_size": 3}
    check("QuantizeLinear", [x, s], {**blocked, "output_dtype": TensorProto.INT4}, opset=opset, oracle="ref")
    check("QuantizeLinear", [x, s, np.zeros((4, 2), U4)], blocked, opset=opset, const=(2,), oracle="ref")
    check("QuantizeLinear", [x, np.array(0.5, np.float32)], {"output_dtype": TensorProto.FLOAT4E2M1}, opset=opset,
          oracle="ref", rtol=0)
    check("QuantizeLinear", [x, np.array(0.5, np.float16)], {"precision": TensorProto.FLOAT}, opset=opset,
          oracle="ref")
    check("DequantizeLinear", [q((4, 6), np.int8), s.astype(np.float16), np.ones((4, 2), np.int8)],
          {**blocked, "output_dtype": TensorProto.FLOAT}, opset=opset, oracle="ref")
    xf4 = np.linspace(-6, 6, 24, dtype=np.float32).reshape(4, 6).astype(ml_dtypes.float4_e2m1fn)
    check("DequantizeLinear", [xf4, s], blocked, opset=opset, const=(0,), oracle="ref")
    if opset >= 25:
        check("QuantizeLinear", [x, s, np.zeros((4, 2), I2)], blocked, opset=opset, const=(2,), oracle="ref")
        check("QuantizeLinear", [x, np.array(1.0, np.float32), np.array(1, U2)], {}, opset=opset, const=(2,),
              oracle="ref")
        check("DequantizeLinear", [RNG.integers(-2, 2, (4, 6)).astype(I2), s], blocked, opset=opset, const=(0,),
              oracle="ref")


@pytest.mark.parametrize("zp", [None, np.array([3, 0, 250], np.uint8)])
def test_ms_quantize_dequantize(zp):
    """com.microsoft's versions: axis defaults to 1; int16/uint16 and int4 as in ONNX."""
    x, s = f(2, 3, 4), np.array([0.1, 0.2, 0.3], np.float32)
    check("QuantizeLinear", [x, s, zp], domain=MS)
    check("DequantizeLinear", [q((2, 3, 4)), s, zp], domain=MS)
    check("QuantizeLinear", [x, np.array(0.01, np.float32), np.array(7, np.int16)], domain=MS)
    check("DequantizeLinear", [q((2, 3, 4), np.uint16), s, np.array([7, 8, 9], np.uint16)], {"axis": 1}, domain=MS)
    check("QuantizeLinear", [x.astype(np.float16), np.array(0.5, np.float16), np.array(1, np.uint16)], domain=MS)


def test_dynamic_quantize_linear():
    for x in (f(64, 33), np.abs(f(10)), -np.abs(f(10)), np.zeros(5, np.float32),
              np.array([-3.2, 0.0, 1.1, 7.7, -0.001], np.float32)):
        check("DynamicQuantizeLinear", [x], opset=11, num_outputs=3)


@pytest.mark.parametrize("op,opset", [("DequantizeLinear", 10), ("DequantizeLinear", 13),
                                      ("DequantizeLinear", 19), ("QuantizeLinear", 10), ("QuantizeLinear", 19)])
def test_runs_own_kernel_not_fallback(op, opset):
    x = q((4, 3)) if op == "DequantizeLinear" else f(4, 3)
    run_ours(one_node(op, [x, np.array(0.5, np.float32), np.array(3, np.uint8)], opset=opset),
             [x, np.array(0.5, np.float32), np.array(3, np.uint8)])


# -- integer GEMMs --------------------------------------------------------------------------------------

MIXES = [(np.uint8, np.uint8), (np.uint8, np.int8), (np.int8, np.int8), (np.int8, np.uint8)]


@pytest.mark.parametrize("ta,tb", MIXES)
@pytest.mark.parametrize("sa,sb", [((5, 7), (7, 3)), ((2, 4, 9), (9, 6)), ((2, 1, 3, 8), (4, 8, 5)), ((7,), (7, 4))])
def test_matmul_integer(ta, tb, sa, sb):
    a, b = q(sa, ta), q(sb, tb)
    if ta is np.uint8 and tb is np.int8:   # full range, against exact arithmetic (u8s8's docstring)
        (y,) = run_ours(one_node("MatMulInteger", [a, b], opset=10), [a, b])
        np.testing.assert_array_equal(y, np.matmul(a.astype(np.int64), b.astype(np.int64)).astype(np.int32))
        b = u8s8(b)
    check("MatMulInteger", [a, b], opset=10)
    check("MatMulInteger", [a, b, np.array(3, ta), np.array(5, tb)], opset=10)
    # b's zero point per column: an N-vector, or (batch..., 1, N) for a batched b
    zb = q(sb[-1:], tb) if len(sb) == 2 else q(sb[:-2] + (1, sb[-1]), tb)
    check("MatMulInteger", [a, b, None, zb], opset=10)


def test_matmul_integer_per_row_a_zero_point_and_large_k():
    """A's zero point per row (the spec's M-vector; onnxruntime and the reference reject
    it: the oracle is int64 numpy); K = 4096 of full-range uint8 still accumulates exactly."""
    inputs = [q((5, 6)), q((6, 3)), q((5,)), np.array(7, np.uint8)]
    (y,) = run_ours(one_node("MatMulInteger", inputs, opset=10), inputs)
    a, b, za, zb = (v.astype(np.int64) for v in inputs)
    np.testing.assert_array_equal(y, ((a - za[:, None]) @ (b - zb)).astype(np.int32))
    check("MatMulInteger", [q((3, 4096)), q((4096, 5)), np.array(255, np.uint8), np.array(0, np.uint8)])


@pytest.mark.parametrize("ta,tb", MIXES[:3])     # onnxruntime has no int8 x uint8 QLinearMatMul
@pytest.mark.parametrize("per_column", [False, True])
def test_qlinear_matmul(ta, tb, per_column):
    a, b = q((2, 6, 40), ta), u8s8(q((40, 9), tb), ta)
    bs, bz = (pos(9), q((9,), tb)) if per_column else (np.array(0.05, np.float32), np.array(4, tb))
    inputs = [a, np.array(0.02, np.float32), np.array(2, ta), b, bs, bz, np.array(0.9, np.float32), np.array(5, ta)]
    check("QLinearMatMul", inputs, opset=10)     # onnxruntime's y has a's type
    check("QLinearMatMul", inputs, opset=21)
    half = [a, np.array(0.02, np.float16), np.array(2, ta), b, bs.astype(np.float16), bz, np.array(0.9, np.float16),
            np.array(5, ta)]
    check("QLinearMatMul", half, opset=21)


CONVS = [
    ((1, 3, 7, 7), (4, 3, 3, 3), {}),
    ((2, 4, 9, 8), (6, 4, 3, 3), {"pads": [1, 0, 2, 1], "strides": [2, 1]}),
    ((2, 4, 9, 8), (6, 2, 3, 2), {"group": 2, "dilations": [2, 1], "pads": [2, 0, 1, 1]}),
    ((2, 4, 9, 8), (6, 4, 2, 3), {"strides": [2, 2], "auto_pad": "SAME_UPPER"}),
    ((1, 6, 10, 10), (6, 1, 3, 3), {"group": 6, "pads": [1, 1, 1, 1]}),
    ((1, 8, 6, 6), (16, 8, 1, 1), {}),
    ((2, 3, 11), (4, 3, 3), {"pads": [2, 1]}),
    ((1, 2, 5, 5, 5), (2, 1, 3, 3, 3), {"group": 2, "strides": [2, 1, 2], "auto_pad": "SAME_LOWER"}),
]


@pytest.mark.parametrize("xs,ws,attrs", CONVS)
@pytest.mark.parametrize("tx,tw", [(np.uint8, np.uint8), (np.uint8, np.int8), (np.int8, np.int8)])
def test_conv_integer(xs, ws, attrs, tx, tw):
    x, w = q(xs, tx), q(ws, tw)
    check("ConvInteger", [x, w], attrs, opset=10)
    check("ConvInteger", [x, w, np.array(100, tx), np.array(3, tw)], attrs, opset=10)


@pytest.mark.parametrize("xs,ws,attrs", CONVS)
@pytest.mark.parametrize("tx,tw", [(np.uint8, np.uint8), (np.uint8, np.int8), (np.int8, np.int8)])
def test_qlinear_conv(xs, ws, attrs, tx, tw):
    """Per-tensor and per-channel weights, bias on and off; onnxruntime requantizes as we do."""
    x, w, m = q(xs, tx), u8s8(q(ws, tw), tx), ws[0]
    wz = np.array(0, tw) if tw is np.int8 else np.array(120, tw)
    base = [x, np.array(0.03, np.float32), np.array(110 if tx is np.uint8 else -3, tx), w]
    tail = [np.array(0.2, np.float32), np.array(125 if tx is np.uint8 else 1, tx)]
    check("QLinearConv", base + [np.array(0.01, np.float32), wz] + tail, attrs, opset=10)
    bias = RNG.integers(-3000, 3000, (m,)).astype(np.int32)
    per_channel = [pos(m) / 10, np.zeros(m, tw) if tw is np.int8 else np.full(m, 120, tw)]
    check("QLinearConv", base + per_channel + tail + [bias], attrs, opset=10)


def test_ms_qlinear_conv_channels_last():
    x, w = q((2, 4, 9, 8)), u8s8(q((6, 4, 3, 3), np.int8))
    nchw = [x, np.array(0.03, np.float32), np.array(110, np.uint8), w, pos(6) / 10, np.zeros(6, np.int8),
            np.array(0.2, np.float32), np.array(125, np.uint8), RNG.integers(-99, 99, 6).astype(np.int32)]
    attrs = {"pads": [1, 1, 1, 1], "strides": [2, 1]}
    want = run_ort(one_node("QLinearConv", nchw, attrs, opset=10), nchw)[0]
    nhwc = [np.ascontiguousarray(x.transpose(0, 2, 3, 1))] + nchw[1:]
    (got,) = check("QLinearConv", nhwc, {**attrs, "channels_last": 1}, domain=MS)
    np.testing.assert_array_equal(got, want.transpose(0, 2, 3, 1))


# -- float32 or float64 GEMMs: exact either way ---------------------------------------------------------

@pytest.mark.parametrize("k", [258, 259])
def test_integer_gemm_float32_bound(k):
    """255 * 255 * 258 is just below 2**24 (float32's exact integers) and runs in float32;
    259 of them would round there (an odd sum past 2**24), so that GEMM runs in float64."""
    a, b = np.full((2, k), 255, np.uint8), np.full((k, 3), 255, np.uint8)
    a[1, 0] = 254
    inputs = [a, b, np.array(0, np.uint8), np.array(0, np.uint8)]
    for const in ((), (1, 3)):
        (y,) = run_ours(one_node("MatMulInteger", inputs, opset=10, const=const), inputs)
        np.testing.assert_array_equal(y, (a.astype(np.int64) @ b.astype(np.int64)).astype(np.int32))


@pytest.mark.parametrize("op", ["ConvInteger", "QLinearConv"])
def test_constant_filters_are_cached(op):
    """Filters as initializers are shifted and converted once: three runs on new inputs,
    each equal to onnxruntime (a 1x1, a 3x3 and a depthwise conv, and a bias past 2**24).
    Its own generator: the shared RNG's stream feeds test_contrib_quant's cases."""
    rng = np.random.default_rng(11)
    for ws, attrs in [((8, 6, 1, 1), {}), ((8, 6, 3, 3), {"pads": [1, 1, 1, 1]}), ((6, 1, 3, 3), {"group": 6})]:
        m = ws[0]
        x, w = rng.integers(0, 256, (1, 6, 9, 9)).astype(np.uint8), u8s8(rng.integers(-128, 128, ws).astype(np.int8))
        if op == "ConvInteger":
            inputs, const = [x, w, np.array(7, np.uint8), np.array(0, np.int8)], (1, 3)
        else:
            bias = rng.integers(-3000, 3000, (m,)).astype(np.int32)
            bias[0] = (1 << 25) + 1
            inputs = [x, np.array(0.03, np.float32), np.array(110, np.uint8), w,
                      rng.uniform(0.001, 0.02, m).astype(np.float32), np.zeros(m, np.int8),
                      np.array(0.2, np.float32), np.array(125, np.uint8), bias]
            const = (3, 4, 5, 8)
        model = one_node(op, inputs, attrs, opset=10, const=const)
        session = gx.Session(gx.load(model))
        for _ in range(3):
            inputs[0] = rng.integers(0, 256, x.shape).astype(np.uint8)
            got = session.run(_feeds(model, inputs)).outputs
            np.testing.assert_array_equal(got["y0"], run_ort(model, inputs)[0])
