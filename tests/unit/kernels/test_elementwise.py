"""Elementwise kernels against onnx's reference evaluator (see kernel_oracle)."""

from __future__ import annotations

import numpy as np
import pytest
from kernel_oracle import check_kernel, run_ours
from onnx import TensorProto

from graphexec.kernels.registry import Unsupported

RNG = np.random.default_rng(0)
F32 = RNG.standard_normal((3, 4)).astype(np.float32)
POS = (RNG.random((3, 4)) + 0.5).astype(np.float32)
UNIT = (RNG.random((3, 4)) * 1.8 - 0.9).astype(np.float32)


def ints(dtype, lo=-20, hi=20, shape=(3, 4)):
    return RNG.integers(max(lo, np.iinfo(dtype).min), hi, size=shape).astype(dtype)


@pytest.mark.parametrize("op,x", [
    ("Neg", F32), ("Abs", F32), ("Sqrt", POS), ("Exp", F32), ("Log", POS), ("Reciprocal", POS),
    ("Floor", F32 * 3), ("Ceil", F32 * 3), ("Sign", F32), ("Tanh", F32), ("Sin", F32), ("Cos", F32),
    ("Tan", UNIT), ("Asin", UNIT), ("Acos", UNIT), ("Atan", F32), ("Sinh", F32), ("Cosh", F32),
    ("Asinh", F32), ("Acosh", POS + 1), ("Atanh", UNIT), ("Relu", F32), ("Sigmoid", F32 * 50),
    ("Softplus", F32 * 40), ("Softsign", F32), ("HardSwish", F32 * 4), ("Mish", F32 * 5),
    ("Neg", ints(np.int8)), ("Abs", ints(np.int32)), ("Sign", ints(np.int64)), ("Relu", ints(np.int32)),
    ("Sqrt", F32.astype(np.float64) ** 2), ("Exp", F32.astype(np.float16)), ("Sigmoid", F32.astype(np.float16)),
])
def test_unary(op, x):
    check_kernel(op, [x])


def test_round_half_to_even():
    check_kernel("Round", [np.array([0.5, 1.5, 2.5, -0.5, -1.5, 2.4, -2.6], dtype=np.float32)])


def test_erf_accuracy():
    x = np.concatenate([np.linspace(-6, 6, 2001), [0.0, 1e-9, -1e-4, 0.4999, 0.5, np.inf, -np.inf]])
    for dt in (np.float32, np.float64):
        check_kernel("Erf", [x.astype(dt)], rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("op,attrs", [
    ("LeakyRelu", {}), ("LeakyRelu", {"alpha": 0.3}), ("Elu", {}), ("Elu", {"alpha": 2.0}),
    ("Selu", {}), ("Selu", {"alpha": 2.0, "gamma": 3.0}), ("Celu", {"alpha": 0.5}),
    ("HardSigmoid", {}), ("HardSigmoid", {"alpha": 0.5, "beta": 0.6}), ("ThresholdedRelu", {"alpha": 0.3}),
])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_activation_attrs(op, attrs, dtype):
    check_kernel(op, [(F32 * 3).astype(dtype)], attrs)


@pytest.mark.parametrize("slope", [np.float32([0.1]), (POS[0] / 4), POS / 4])
def test_prelu_broadcast(slope):
    check_kernel("PRelu", [F32, slope.astype(np.float32)])


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int8, np.int32, np.int64, np.uint8, np.uint64])
def test_arith(op, dtype):
    if np.dtype(dtype).kind == "f":
        a, b = F32.astype(dtype), (POS[0] * np.float32(2)).astype(dtype)
    else:
        a, b = ints(dtype, lo=-50, hi=50), ints(dtype, lo=1, hi=7, shape=(4,))
    check_kernel(op, [a, b], opset=14)


def test_div_truncates_toward_zero():
    a = np.array([7, -7, 7, -7, 6, -1], dtype=np.int32)
    b = np.array([2, 2, -2, -2, 4, 3], dtype=np.int32)
    np.testing.assert_array_equal(run_ours("Div", [a, b], {}, 14)[0], [3, -3, -3, 3, 1, 0])
    check_kernel("Div", [a, b])


@pytest.mark.parametrize("a,b", [
    (F32, np.float32(2.0) * np.ones((), np.float32)), (POS, F32), (ints(np.int32, 0, 5), ints(np.int32, 0, 4)),
    (ints(np.int64, 0, 5), np.array(2.5, np.float32)), (F32, ints(np.int64, 0, 3, (4,))),
])
def test_pow_keeps_base_dtype(a, b):
    check_kernel("Pow", [a, b], opset=15)


def test_pow_negative_integer_exponent_unsupported():
    with pytest.raises(Unsupported):
        run_ours("Pow", [np.array([2], np.int32), np.array([-1], np.int32)], {}, 15)


@pytest.mark.parametrize("fmod", [0, 1])
@pytest.mark.parametrize("dtype", [np.int32, np.int8, np.float32, np.float64])
def test_mod(fmod, dtype):
    a = np.array([-7, 7, -7, 7, 0, 5, -3], dtype=dtype)
    b = np.array([3, -3, -3, 3, 2, 5, 4], dtype=dtype)
    if fmod == 0 and np.dtype(dtype).kind == "f":
        check_kernel("Mod", [a, b], {"fmod": fmod}, opset=28)
    else:
        check_kernel("Mod", [a, b], {"fmod": fmod}, opset=13)


@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
@pytest.mark.parametrize("dtype", [np.uint8, np.uint32, np.uint64, np.int8, np.int32])
def test_bitshift(direction, dtype):
    x = ints(dtype, lo=-100, hi=100, shape=(12,))
    bits = np.dtype(dtype).itemsize * 8
    y = np.array([0, 1, 2, 3, bits - 1, bits, bits + 3, 5, 1, 0, 2, 7], dtype=dtype)
    if np.dtype(dtype).kind == "i":
        y[-1] = -1
    check_kernel("BitShift", [x, y], {"direction": direction}, opset=28)


@pytest.mark.parametrize("opset,args", [
    (6, {"min": -0.5, "max": 0.7}), (6, {"min": -0.5}), (6, {}),
    (13, [np.float32(-0.5), np.float32(0.7)]), (13, [None, np.float32(0.7)]), (13, [np.float32(0.3)]),
    (13, []), (13, [np.float32(1.0), np.float32(0.0)]),
])
def test_clip(opset, args):
    x = np.append(F32.ravel(), np.nan).astype(np.float32)
    if opset < 11:
        check_kernel("Clip", [x], args, opset=opset)
    else:
        check_kernel("Clip", [x] + [None if a is None else np.array(a) for a in args], opset=opset)


def test_clip_int8():
    check_kernel("Clip", [ints(np.int8), np.array(-3, np.int8), np.array(5, np.int8)])


@pytest.mark.parametrize("op", ["Max", "Min", "Sum", "Mean"])
@pytest.mark.parametrize("n", [1, 2, 3])
def test_variadic_broadcast(op, n):
    xs = [F32, POS[0], np.float32([[1.5], [-2.0], [0.1]])][:n]
    check_kernel(op, xs)


def test_max_propagates_nan_and_keeps_int_dtype():
    check_kernel("Max", [np.float32([np.nan, 1.0, 2.0]), np.float32([0.0, np.nan, 3.0])])
    check_kernel("Min", [ints(np.uint16, 0, 100), ints(np.uint16, 0, 100)])


@pytest.mark.parametrize("op", ["Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"])
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.uint8])
def test_compare(op, dtype):
    a, b = ints(np.int8, -3, 3).astype(dtype), ints(np.int8, -3, 3, shape=(4,)).astype(dtype)
    check_kernel(op, [a, b])


@pytest.mark.parametrize("op", ["And", "Or", "Xor"])
def test_logic(op):
    check_kernel(op, [F32 > 0, POS[0] > 1.0])
    check_kernel("Not", [F32 > 0])


def test_where_broadcast():
    check_kernel("Where", [F32 > 0, F32, np.float32(-1.0) * np.ones((1, 4), np.float32)])
    out = run_ours("Where", [np.array([True, False]), np.array(["a", "b"]), np.array(["c", "d"])], {}, 16)[0]
    np.testing.assert_array_equal(out, ["a", "d"])


@pytest.mark.parametrize("to", [TensorProto.FLOAT16, TensorProto.DOUBLE, TensorProto.INT32, TensorProto.INT8,
                                TensorProto.UINT8, TensorProto.BOOL, TensorProto.INT64])
@pytest.mark.parametrize("src", [F32 * 100, ints(np.int32, 0, 200), F32 > 0])
def test_cast(to, src):
    check_kernel("Cast", [src], {"to": to})


def test_cast_opset1_string_attribute():
    out = run_ours("Cast", [F32], {"to": "DOUBLE"}, 1)[0]
    assert out.dtype == np.float64


@pytest.mark.parametrize("to", [TensorProto.STRING, TensorProto.BFLOAT16, TensorProto.FLOAT8E4M3FN, TensorProto.INT4])
def test_cast_exotic_unsupported(to):
    with pytest.raises(Unsupported):
        run_ours("Cast", [F32], {"to": to}, 21)


@pytest.mark.parametrize("attrs", [{}, {"detect_negative": 0}, {"detect_positive": 0},
                                   {"detect_negative": 0, "detect_positive": 0}])
def test_isinf_isnan(attrs):
    x = np.float32([1.0, np.inf, -np.inf, np.nan, 0.0])
    check_kernel("IsInf", [x], attrs)
    check_kernel("IsNaN", [x])


def test_zero_dim_results_are_arrays():
    out = run_ours("Add", [np.array(1.0, np.float32), np.array(2.0, np.float32)], {}, 14)[0]
    assert isinstance(out, np.ndarray) and out.shape == () and out.dtype == np.float32


@pytest.mark.parametrize("op,inputs", [
    ("Add", [np.array([True]), np.array([False])]),
    ("Add", [np.float32([1]), np.float64([1])]),
    ("Equal", [np.array(["a"], dtype=object), np.array(["a"], dtype=object)]),
    ("Sqrt", [np.array([4], np.int32)]),
    ("PRelu", [np.zeros((2, 3, 4), np.float32), np.zeros(3, np.float32)]),  # not unidirectional
])
def test_unsupported_dtypes(op, inputs):
    with pytest.raises(Unsupported):
        run_ours(op, inputs, {}, 21)


def test_legacy_broadcast_opsets_have_no_kernel():
    from graphexec.kernels import registry

    assert registry.lookup("Add", "", 6) is None and registry.lookup("Add", "", 7) is not None
