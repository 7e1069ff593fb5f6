"""Integer GEMMs: MatMulInteger, QLinearMatMul, ConvInteger, QLinearConv.

The products run in float64 BLAS on the zero-point-shifted operands, and are exact: a
shifted 8-bit value lies in [-255, 255], so each product is below 2**16 and every partial
sum of K of them below 2**53 for any K < 2**37 (numpy's int32 matmul is exact too but has
no BLAS and runs ~50x slower). The int32 accumulator is then that float64 integer.
Requantizing follows onnxruntime: ``rint(float32(acc) * (a_scale * b_scale / y_scale)) + zp``,
saturated, with the multiplier rounded to float32 once per output channel.
"""

from __future__ import annotations

import math

import numpy as np

from graphexec.kernels import quant_shapes as shapes
from graphexec.kernels.conv import _im2col, pad_for_windows, spatial_ints, window_geometry
from graphexec.kernels.quant import INT_RANGES, ms_register, quantize
from graphexec.kernels.registry import OpContext, Unsupported, register

_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)
_INT8 = (np.dtype(np.int8), np.dtype(np.uint8))


def shifted(x: np.ndarray, zp: np.ndarray | None, shape: tuple[int, ...] | None = None) -> np.ndarray:
    """``x - zp`` in float64 (exact); ``zp`` reshaped to ``shape`` when it is not a scalar."""
    if x.dtype not in _INT8:
        raise Unsupported(f"integer GEMM on {x.dtype}")
    v = x.astype(_F64)
    if zp is not None and zp.size:
        if zp.dtype != x.dtype:
            raise ValueError(f"zero point {zp.dtype} does not match its input {x.dtype}")
        v -= zp.astype(_F64).reshape(shape if shape is not None and zp.size > 1 else zp.shape)
    return v


def _row_shape(zp: np.ndarray | None, a: np.ndarray) -> tuple[int, ...] | None:
    """A's zero point per row: an M-vector is a column; an N-D one is already shaped."""
    return (-1, 1) if zp is not None and zp.ndim == 1 and a.ndim >= 2 else None


def to_int32(acc: np.ndarray) -> np.ndarray:
    """The float64 integer accumulator as int32."""
    return acc.astype(np.int32)


def requantize(acc: np.ndarray, mult: np.ndarray, zp: np.ndarray | None, dtype: np.dtype) -> np.ndarray:
    """``acc`` (exact integers, float64) scaled by float32 ``mult`` into ``dtype`` around ``zp``."""
    if dtype not in INT_RANGES:
        raise Unsupported(f"requantize to {dtype}")
    z = None if zp is None else zp.astype(_F32).reshape(())
    return quantize(acc.astype(_F32) * mult, dtype, z)


def multiplier(*scales: np.ndarray, y_scale: np.ndarray | None = None) -> np.ndarray:
    """The product of ``scales`` (then divided by ``y_scale``), in float32 arithmetic."""
    m = np.ones((), _F32)
    for s in scales:
        m = m * s.astype(_F32)
    return m if y_scale is None else m / y_scale.astype(_F32)


@register("MatMulInteger", since=10)
def matmul_integer(ctx: OpContext, a: np.ndarray, b: np.ndarray, a_zp: np.ndarray | None = None,
                   b_zp: np.ndarray | None = None) -> np.ndarray:
    """int32 (a - a_zp) @ (b - b_zp); a's zero point per row (M), b's per column (N)."""
    return to_int32(np.matmul(shifted(a, a_zp, _row_shape(a_zp, a)), shifted(b, b_zp)))


@register("QLinearMatMul", since=10)
def qlinear_matmul(ctx: OpContext, a: np.ndarray, a_scale: np.ndarray, a_zp: np.ndarray, b: np.ndarray,
                   b_scale: np.ndarray, b_zp: np.ndarray, y_scale: np.ndarray, y_zp: np.ndarray) -> np.ndarray:
    """Integer matmul requantized to y's type; b's scale and zero point may be per column.
    Float8 operands (opset 21) are left to the reference."""
    acc = np.matmul(shifted(a, a_zp), shifted(b, b_zp))
    return requantize(acc, multiplier(a_scale, b_scale, y_scale=y_scale), y_zp, y_zp.dtype)


def int_conv(ctx: OpContext, x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """N-d convolution of shifted (float64) operands: zero padding, im2col, one batched GEMM.
    Not conv.py's fast paths: Winograd's transforms are not exact."""
    nd = x.ndim - 2
    kernel = list(w.shape[2:])
    if nd < 1 or w.ndim != x.ndim or list(ctx.attr("kernel_shape", kernel)) != kernel:
        raise ValueError(f"{ctx.op}: x {x.shape}, w {w.shape}, kernel_shape {ctx.attrs.get('kernel_shape')}")
    groups = int(ctx.attr("group", 1))
    m, cg = w.shape[:2]
    if groups < 1 or x.shape[1] != cg * groups or m % groups:
        raise ValueError(f"{ctx.op}: channels x={x.shape[1]} w={w.shape} group={groups}")
    strides, dil = spatial_ints(ctx, "strides", nd, 1), spatial_ints(ctx, "dilations", nd, 1)
    out, pb, _ = window_geometry(ctx, x.shape[2:], kernel, strides, dil)
    eff = [(k - 1) * d + 1 for k, d in zip(kernel, dil)]
    cols = _im2col(pad_for_windows(x, out, pb, strides, eff), groups, out, strides, kernel, dil)
    y = np.matmul(w.reshape(groups, m // groups, math.prod(w.shape[1:])), cols)
    return y.reshape((x.shape[0], m) + tuple(out))


def _weights(w: np.ndarray, w_zp: np.ndarray | None) -> np.ndarray:
    """Shifted filters; a per-output-channel zero point lines up with the first axis."""
    return shifted(w, w_zp, (-1,) + (1,) * (w.ndim - 1))


@register("ConvInteger", since=10)
def conv_integer(ctx: OpContext, x: np.ndarray, w: np.ndarray, x_zp: np.ndarray | None = None,
                 w_zp: np.ndarray | None = None) -> np.ndarray:
    """int32 conv of (x - x_zp) and (w - w_zp): padding is x's zero point, as the spec says."""
    return to_int32(int_conv(ctx, shifted(x, x_zp), _weights(w, w_zp)))


@register("QLinearConv", since=10)
@ms_register("QLinearConv", shapes.qlinear_conv)
def qlinear_conv(ctx: OpContext, x: np.ndarray, x_scale: np.ndarray, x_zp: np.ndarray, w: np.ndarray,
                 w_scale: np.ndarray, w_zp: np.ndarray, y_scale: np.ndarray, y_zp: np.ndarray,
                 bias: np.ndarray | None = None) -> np.ndarray:
    """Integer conv plus the int32 bias, requantized per output channel (w's scale may be
    per channel). com.microsoft's ``channels_last`` takes and gives N...C."""
    last = bool(ctx.attr("channels_last", 0))
    if last:
        x = np.moveaxis(x, -1, 1)
    acc = int_conv(ctx, shifted(x, x_zp), _weights(w, w_zp))
    sp = (1,) * (acc.ndim - 2)
    if bias is not None:
        acc += bias.astype(_F64).reshape((1, -1) + sp)
    mult = multiplier(x_scale, w_scale, y_scale=y_scale)
    y = requantize(acc, mult.reshape((1, -1) + sp) if mult.size > 1 else mult, y_zp, y_zp.dtype)
    return np.ascontiguousarray(np.moveaxis(y, 1, -1)) if last else y
