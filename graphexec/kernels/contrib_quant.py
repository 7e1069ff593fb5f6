"""onnxruntime's quantized elementwise, pooling and softmax ops (com.microsoft), the ones
its quantization tools write in QOperator format.

Every scale and zero point is per tensor. The arithmetic follows onnxruntime's (MLAS):
float32 throughout, scale ratios formed first, ``rint`` (half to even), then saturation.
A unary op of a 256-value type is a lookup table, computed once per node and set of
quantization parameters, as onnxruntime does it.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from graphexec.kernels import pool
from graphexec.kernels import quant_shapes as shapes
from graphexec.kernels.conv import pad_for_windows
from graphexec.kernels.quant import ms_register, quantize
from graphexec.kernels.registry import OpContext

_F32 = np.dtype(np.float32)
_INT8 = (np.dtype(np.int8), np.dtype(np.uint8))


def _f(v: np.ndarray | None) -> np.float32:
    """A per-tensor scale or zero point as float32 (an omitted zero point is 0)."""
    if v is None:
        return np.float32(0)
    if v.size != 1:
        raise ValueError(f"expected a per-tensor scalar, got shape {v.shape}")
    return np.float32(v.reshape(()).astype(_F32))


def _check8(x: np.ndarray, *zps: np.ndarray | None) -> np.dtype:
    if x.dtype not in _INT8 or any(z is not None and z.dtype != x.dtype for z in zps):
        raise ValueError(f"expected int8/uint8 with zero points of the same type, got {x.dtype}")
    return x.dtype


def _out(v: np.ndarray, dtype: np.dtype, zp: np.ndarray | None) -> np.ndarray:
    with np.errstate(all="ignore"):
        return quantize(v, dtype, None if zp is None else _f(zp), inplace=True)


def _out_sum(v: np.ndarray, dtype: np.dtype, zp: np.ndarray | None) -> np.ndarray:
    """MLAS's binary kernels add the output zero point before rounding (in float32, so
    ``v + zp`` may itself round onto a tie), unlike its QuantizeLinear."""
    with np.errstate(all="ignore"):
        v = v + _f(zp) if zp is not None else v
        return quantize(v, dtype, None, inplace=True)


@ms_register("QLinearAdd", shapes.binary)
def qlinear_add(ctx: OpContext, a: np.ndarray, a_s: np.ndarray, a_zp: np.ndarray | None, b: np.ndarray,
                b_s: np.ndarray, b_zp: np.ndarray | None, c_s: np.ndarray,
                c_zp: np.ndarray | None = None) -> np.ndarray:
    """C = (a_s/c_s)·(A - a_zp) + (b_s/c_s)·(B - b_zp) + c_zp, broadcasting."""
    dtype = _check8(a, a_zp, b, b_zp, c_zp)
    ra, rb = _f(a_s) / _f(c_s), _f(b_s) / _f(c_s)
    return _out_sum((a.astype(_F32) - _f(a_zp)) * ra + (b.astype(_F32) - _f(b_zp)) * rb, dtype, c_zp)


@ms_register("QLinearMul", shapes.binary)
def qlinear_mul(ctx: OpContext, a: np.ndarray, a_s: np.ndarray, a_zp: np.ndarray | None, b: np.ndarray,
                b_s: np.ndarray, b_zp: np.ndarray | None, c_s: np.ndarray,
                c_zp: np.ndarray | None = None) -> np.ndarray:
    """C = (A - a_zp)·(B - b_zp)·(a_s·b_s/c_s) + c_zp, broadcasting."""
    dtype = _check8(a, a_zp, b, b_zp, c_zp)
    prod = (a.astype(_F32) - _f(a_zp)) * (b.astype(_F32) - _f(b_zp))
    return _out_sum(prod * (_f(a_s) * _f(b_s) / _f(c_s)), dtype, c_zp)


def _table(ctx: OpContext, dtype: np.dtype, params: tuple[Any, ...], fn: Callable[[np.ndarray], np.ndarray],
           x_s: np.float32, x_zp: np.float32, y_s: np.float32, y_zp: np.ndarray | None) -> np.ndarray:
    """The 256 outputs of quantize(fn(dequantize(v))) for every byte v, cached per node."""
    key = ("table", dtype.str, params)
    table = ctx.cache.get(key)
    if table is None:
        v = np.arange(256, dtype=np.uint8).view(dtype)
        with np.errstate(all="ignore"):
            table = ctx.cache[key] = _out(fn((v.astype(_F32) - x_zp) * x_s) / y_s, dtype, y_zp)
    return table


def _lookup(ctx: OpContext, x: np.ndarray, x_s: np.ndarray, x_zp: np.ndarray | None, y_s: np.ndarray,
            y_zp: np.ndarray | None, fn: Callable[[np.ndarray], np.ndarray], *extra: Any) -> np.ndarray:
    dtype = _check8(x, x_zp, y_zp)
    xs, xz, ys = _f(x_s), _f(x_zp), _f(y_s)
    params = (float(xs), float(xz), float(ys), float(_f(y_zp)), *extra)
    return _table(ctx, dtype, params, fn, xs, xz, ys, y_zp)[x.view(np.uint8)]


@ms_register("QLinearSigmoid", shapes.like_input)
def qlinear_sigmoid(ctx: OpContext, x: np.ndarray, x_s: np.ndarray, x_zp: np.ndarray | None, y_s: np.ndarray,
                    y_zp: np.ndarray | None = None) -> np.ndarray:
    return _lookup(ctx, x, x_s, x_zp, y_s, y_zp, lambda v: 1 / (1 + np.exp(-v)))


@ms_register("QLinearLeakyRelu", shapes.like_input)
def qlinear_leaky_relu(ctx: OpContext, x: np.ndarray, x_s: np.ndarray, x_zp: np.ndarray | None, y_s: np.ndarray,
                       y_zp: np.ndarray | None = None) -> np.ndarray:
    alpha = np.float32(ctx.attr("alpha", 0.01))
    return _lookup(ctx, x, x_s, x_zp, y_s, y_zp, lambda v: np.where(v >= 0, v, v * alpha), float(alpha))


@ms_register("QLinearConcat", shapes.concat)
def qlinear_concat(ctx: OpContext, y_s: np.ndarray, y_zp: np.ndarray, *parts: np.ndarray) -> np.ndarray:
    """Inputs after Y's scale and zero point come in (tensor, scale, zero point) triples; each
    tensor is requantized to Y's parameters by a lookup table unless it already has them."""
    if len(parts) % 3 or not parts:
        raise ValueError(f"expected (tensor, scale, zero point) triples after y_scale, y_zero_point; got {len(parts)}")
    out = []
    for i in range(0, len(parts), 3):
        x, xs, xz = parts[i:i + 3]
        same = _f(xs) == _f(y_s) and _f(xz) == _f(y_zp) and x.dtype == y_zp.dtype
        out.append(x if same else _lookup(ctx, x, xs, xz, y_s, y_zp, lambda v: v, i))
    return np.concatenate(out, axis=int(ctx.attr("axis")))


@ms_register("QLinearGlobalAveragePool", shapes.global_pool)
def qlinear_global_average_pool(ctx: OpContext, x: np.ndarray, x_s: np.ndarray, x_zp: np.ndarray, y_s: np.ndarray,
                                y_zp: np.ndarray) -> np.ndarray:
    """Exact integer sum per channel, minus n·x_zp, times x_s / (y_s·n); ``channels_last`` is N...C."""
    dtype = _check8(x, x_zp, y_zp)
    last = bool(ctx.attr("channels_last", 0))
    axes = tuple(range(1, x.ndim - 1)) if last else tuple(range(2, x.ndim))
    n = int(np.prod([x.shape[a] for a in axes]))
    acc = x.sum(axis=axes, keepdims=True, dtype=np.int64) - int(_f(x_zp)) * n
    return _out(acc.astype(_F32) * (_f(x_s) / (_f(y_s) * np.float32(n))), dtype, y_zp)


@ms_register("QLinearAveragePool", shapes.average_pool)
def qlinear_average_pool(ctx: OpContext, x: np.ndarray, x_s: np.ndarray, x_zp: np.ndarray | None, y_s: np.ndarray,
                         y_zp: np.ndarray | None = None) -> np.ndarray:
    """Window means of the dequantized input in float32, summed tap by tap in row-major order
    as onnxruntime does (the same sums, bit for bit), then ``rint(mean / y_s + y_zp)``. With
    ``count_include_pad`` the divisor is the kernel size; ``channels_last`` is N...C."""
    dtype = _check8(x, x_zp, y_zp)
    last = bool(ctx.attr("channels_last", 0))
    v = (x.astype(_F32) - _f(x_zp)) * _f(x_s)
    if last:
        v = np.moveaxis(v, -1, 1)
    kernel, strides, dil, out, pb, pe = pool._setup(ctx, v, dilations=False)
    total = pool._window_sum(pad_for_windows(v, out, pb, strides, kernel), out, strides, kernel, dil)
    if ctx.attr("count_include_pad", 0):
        count: Any = np.float32(np.prod(kernel))
    else:
        count = pool._counts(v.shape[2:], out, pb, pe, strides, kernel, dil, False).astype(_F32)
    with np.errstate(all="ignore"):
        y = quantize(total / count / _f(y_s) + _f(y_zp), dtype, inplace=True)
    return np.ascontiguousarray(np.moveaxis(y, 1, -1)) if last else y


@ms_register("QLinearSoftmax", shapes.like_input)
def qlinear_softmax(ctx: OpContext, x: np.ndarray, x_s: np.ndarray, x_zp: np.ndarray | None, y_s: np.ndarray,
                    y_zp: np.ndarray) -> np.ndarray:
    """Softmax of the dequantized input in float32; before opset 13 (the ``opset`` attribute)
    it normalizes over all axes from ``axis`` on, as Softmax did."""
    dtype = _check8(x, x_zp, y_zp)
    axis = int(ctx.attr("axis", -1)) % max(x.ndim, 1)
    axes = tuple(range(axis, x.ndim)) if int(ctx.attr("opset", 13)) < 13 else (axis,)
    v = (x.astype(_F32) - _f(x_zp)) * _f(x_s)
    e = np.exp(v - v.max(axis=axes, keepdims=True))
    return _out(e / e.sum(axis=axes, keepdims=True) / _f(y_s), dtype, y_zp)
