"""Integer GEMMs: MatMulInteger, QLinearMatMul, ConvInteger, QLinearConv.

The products run in float BLAS on the zero-point-shifted operands, and are exact: a
shifted 8-bit value lies in [-255, 255], so each product is below 2**16 and every partial
sum of K of them below 2**53 for any K < 2**37 (numpy's int32 matmul is exact too but has
no BLAS and runs ~50x slower). float32 holds every integer up to 2**24, so when no partial
sum can pass that (A's largest shifted value times the largest L1 norm of the weights
feeding one output) the GEMM runs in float32, at half the bytes and twice the speed, and
gives the same integers; otherwise K is cut into spans that each are exact in float32 (a
float32 GEMM per span, the spans summed in float64), or, where the spans would be short,
the GEMM runs in float64 (the plain path, ``GRAPHEXEC_PLAIN``). Constant weights are shifted, converted and
measured once per node (``ctx.cache``). The int32 accumulator is then that float integer.
Requantizing follows onnxruntime: ``rint(float32(acc) * (a_scale * b_scale / y_scale)) + zp``,
saturated, with the multiplier rounded to float32 once per output channel.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from graphexec import _switch
from graphexec.kernels import quant_shapes as shapes
from graphexec.kernels.conv import _im2col, pad_for_windows, spatial_ints, window_geometry
from graphexec.kernels.conv2d import Geometry, fast_conv
from graphexec.kernels.quant import INT_RANGES, ms_register, quantize
from graphexec.kernels.registry import OpContext, Unsupported, register

_F32, _F64, _I16 = np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.int16)
_INT8 = (np.dtype(np.int8), np.dtype(np.uint8))
EXACT32 = 1 << 24   # float32 holds every integer of at most this magnitude
MIN_CUT = 64        # spans of K shorter than this: float64 instead (a short GEMM each)


def shifted(x: np.ndarray, zp: np.ndarray | None, shape: tuple[int, ...] | None = None,
            dtype: np.dtype = _F64) -> np.ndarray:
    """``x - zp`` in ``dtype`` (exact, int16 too: |x - zp| <= 255); ``zp`` reshaped to ``shape``
    when it is not a scalar."""
    if x.dtype not in _INT8:
        raise Unsupported(f"integer GEMM on {x.dtype}")
    v = x.astype(dtype)
    if zp is not None and zp.size:
        if zp.dtype != x.dtype:
            raise ValueError(f"zero point {zp.dtype} does not match its input {x.dtype}")
        v -= zp.astype(dtype).reshape(shape if shape is not None and zp.size > 1 else zp.shape)
    return v


def reach(dtype: np.dtype, zp: np.ndarray | None) -> int:
    """The largest |x - zp| over every value x of the 8-bit type ``dtype``."""
    lo, hi = INT_RANGES[dtype] if dtype in _INT8 else (-255, 255)
    if zp is None or not zp.size:
        return max(-lo, hi)
    z = zp.astype(np.int64)
    return int(max(hi - z.min(), z.max() - lo))


@dataclass(slots=True)
class IntWeights:
    """A GEMM's weights shifted by their zero point: ``ints`` (int16, exact), ``f32`` (exact),
    float64 made on first use (only where float32 is not exact), and ``l1``, the largest sum
    of |w - zp| over the weights that feed one output."""

    ints: np.ndarray
    f32: np.ndarray
    l1: int
    _f64: np.ndarray | None = None
    _cuts: dict[int, list[tuple[int, int]] | None] = field(default_factory=dict)

    @property
    def f64(self) -> np.ndarray:
        if self._f64 is None:
            self._f64 = self.ints.astype(_F64)
        return self._f64

    def exact32(self, x_reach: int) -> bool:
        """Whether every partial sum against inputs up to ``x_reach`` stays exact in float32."""
        return x_reach * self.l1 <= EXACT32

    def cuts(self, x_reach: int) -> list[tuple[int, int]] | None:
        """Spans of K, each as long as it can be while every partial sum over it against
        inputs up to ``x_reach`` stays exact in float32 (its weights' L1 per output at most
        EXACT32 / x_reach); None when a span would be shorter than ``MIN_CUT`` (float64 is
        then faster). Worked out once per reach."""
        if x_reach not in self._cuts:
            self._cuts[x_reach] = _cuts(self.ints, EXACT32 // max(1, x_reach))
        return self._cuts[x_reach]


def _cuts(w: np.ndarray, limit: int) -> list[tuple[int, int]] | None:
    """Greedy spans of w's K axis (-2, or 0 for a vector) whose |w| sums per output stay
    within ``limit``, by binary search on the prefix sums; None where a span is short."""
    k = w.shape[-2] if w.ndim > 1 else w.shape[0]
    flat = (np.moveaxis(w, -2, 0) if w.ndim > 1 else w).reshape(k, -1)
    cum = np.zeros((k + 1, flat.shape[1]), np.int64)
    np.cumsum(np.abs(flat, dtype=np.int64), axis=0, out=cum[1:])
    spans, s = [], 0
    while s < k:
        lo, hi = s, k   # cum[lo] - cum[s] fits; find the largest such end
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if int((cum[mid] - cum[s]).max(initial=0)) <= limit:
                lo = mid
            else:
                hi = mid - 1
        if lo - s < min(MIN_CUT, k - s):
            return None
        spans.append((s, lo))
        s = lo
    return spans


def int_weights(ctx: OpContext, inputs: tuple[int, ...], k_axes: tuple[int, ...],
                make: Callable[[], np.ndarray]) -> IntWeights:
    """``make()``'s shifted weights (int16) with their L1 bound over ``k_axes``, kept in the
    node's cache when every input among ``inputs`` (the weights and their zero point, when
    given) is a constant of the graph, so the conversion is paid once (in 16-bit integers:
    a third of the float64 work it was, on a first run)."""
    consts = ctx.const_inputs
    constant = all(i < len(consts) and consts[i] for i in inputs)
    hit = ctx.cache.get("int_w") if constant else None
    if hit is None:
        v = make()
        l1 = int(np.abs(v).sum(axis=k_axes, dtype=np.int64).max(initial=0))
        hit = IntWeights(v, v.astype(_F32), l1)
        if constant:
            ctx.cache["int_w"] = hit
    return hit


def given_inputs(*pairs: tuple[int, np.ndarray | None]) -> tuple[int, ...]:
    """The input indices among ``pairs`` (index, value) whose value is given."""
    return tuple(i for i, v in pairs if v is not None)


def _row_shape(zp: np.ndarray | None, a: np.ndarray) -> tuple[int, ...] | None:
    """A's zero point per row: an M-vector is a column; an N-D one is already shaped."""
    return (-1, 1) if zp is not None and zp.ndim == 1 and a.ndim >= 2 else None


def int_matmul(ctx: OpContext, a: np.ndarray, a_zp: np.ndarray | None, b: np.ndarray, b_zp: np.ndarray | None,
               b_inputs: tuple[int, ...], a_shape: tuple[int, ...] | None = None) -> np.ndarray:
    """The exact integer (a - a_zp) @ (b - b_zp) as float32 or float64 integers; ``b_inputs``
    are the input indices of b and of its zero point (given ones), for the weight cache."""
    if a.dtype not in _INT8:
        raise Unsupported(f"integer GEMM on {a.dtype}")
    wb = int_weights(ctx, b_inputs, (-2,) if b.ndim > 1 else (0,), lambda: shifted(b, b_zp, dtype=_I16))
    x_reach = reach(a.dtype, a_zp)
    if wb.exact32(x_reach):
        return np.matmul(shifted(a, a_zp, a_shape, _F32), wb.f32)
    spans = wb.cuts(x_reach) if _switch.FAST else None
    if spans is None:
        return np.matmul(shifted(a, a_zp, a_shape), wb.f64)
    return _in_spans(shifted(a, a_zp, a_shape, _F32), wb.f32, spans)


def _in_spans(af: np.ndarray, bf: np.ndarray, spans: list[tuple[int, int]]) -> np.ndarray:
    """af @ bf as float64 integers: a float32 GEMM per span of K, each exact (``cuts``), the
    spans' integers summed in float64 (exact below 2**53): float32 BLAS at twice float64's
    speed where the whole K would round in float32."""
    acc: np.ndarray | None = None
    for s, e in spans:
        part = np.matmul(af[..., s:e], bf[s:e] if bf.ndim == 1 else bf[..., s:e, :])
        if acc is None:
            acc = part.astype(_F64)
        else:
            acc += part
    assert acc is not None   # K >= 1: cuts gives one span at least
    return acc


def to_int32(acc: np.ndarray) -> np.ndarray:
    """The float integer accumulator as int32."""
    return acc.astype(np.int32)


def requantize(acc: np.ndarray, mult: np.ndarray, zp: np.ndarray | None, dtype: np.dtype) -> np.ndarray:
    """``acc`` (exact integers, float32 or float64, a temporary it may overwrite) scaled by
    float32 ``mult`` into ``dtype`` around ``zp``."""
    if dtype not in INT_RANGES:
        raise Unsupported(f"requantize to {dtype}")
    z = None if zp is None else zp.astype(_F32).reshape(())
    v = acc if acc.dtype == _F32 else acc.astype(_F32)
    if np.broadcast_shapes(v.shape, mult.shape) == v.shape:
        np.multiply(v, mult, out=v)
    else:
        v = v * mult
    # exact integers times finite multipliers: finite or infinite, never NaN
    return quantize(v, dtype, z, inplace=True, nan_free=bool(np.isfinite(mult).all()))


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
    return to_int32(int_matmul(ctx, a, a_zp, b, b_zp, given_inputs((1, b), (3, b_zp)), _row_shape(a_zp, a)))


@register("QLinearMatMul", since=10)
def qlinear_matmul(ctx: OpContext, a: np.ndarray, a_scale: np.ndarray, a_zp: np.ndarray, b: np.ndarray,
                   b_scale: np.ndarray, b_zp: np.ndarray, y_scale: np.ndarray, y_zp: np.ndarray) -> np.ndarray:
    """Integer matmul requantized to y's type; b's scale and zero point may be per column.
    Float8 operands (opset 21) are left to the reference."""
    acc = int_matmul(ctx, a, a_zp, b, b_zp, given_inputs((3, b), (5, b_zp)))
    return requantize(acc, multiplier(a_scale, b_scale, y_scale=y_scale), y_zp, y_zp.dtype)


def int_conv(ctx: OpContext, x: np.ndarray, x_zp: np.ndarray | None, w: np.ndarray, w_zp: np.ndarray | None,
             w_inputs: tuple[int, ...]) -> np.ndarray:
    """N-d convolution of the shifted operands as float integers: zero padding (x's zero
    point, as the spec says), conv2d's exact fast paths in float32 for 2-d, else im2col and
    one batched GEMM. Not Winograd: its transforms are not exact."""
    if x.dtype not in _INT8:
        raise Unsupported(f"integer GEMM on {x.dtype}")
    # a per-output-channel zero point lines up with the first axis
    per_channel = (-1,) + (1,) * (w.ndim - 1)
    ws = int_weights(ctx, w_inputs, tuple(range(1, w.ndim)), lambda: shifted(w, w_zp, per_channel, _I16))
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
    exact32 = ws.exact32(reach(x.dtype, x_zp))
    xs, wv = (shifted(x, x_zp, dtype=_F32), ws.f32) if exact32 else (shifted(x, x_zp), ws.f64)
    if exact32 and nd == 2:
        y = fast_conv(ctx, xs, wv, None, groups, Geometry(kernel, strides, dil, pb, out), None, exact=True)
        if y is not None:
            return y
    eff = [(k - 1) * d + 1 for k, d in zip(kernel, dil)]
    cols = _im2col(pad_for_windows(xs, out, pb, strides, eff), groups, out, strides, kernel, dil)
    y = np.matmul(wv.reshape(groups, m // groups, math.prod(w.shape[1:])), cols)
    return y.reshape((x.shape[0], m) + tuple(out))


@register("ConvInteger", since=10)
def conv_integer(ctx: OpContext, x: np.ndarray, w: np.ndarray, x_zp: np.ndarray | None = None,
                 w_zp: np.ndarray | None = None) -> np.ndarray:
    """int32 conv of (x - x_zp) and (w - w_zp): padding is x's zero point, as the spec says."""
    return to_int32(int_conv(ctx, x, x_zp, w, w_zp, given_inputs((1, w), (3, w_zp))))


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
    acc = int_conv(ctx, x, x_zp, w, w_zp, given_inputs((3, w), (5, w_zp)))
    sp = (1,) * (acc.ndim - 2)
    if bias is not None:
        acc = plus_bias(acc, bias.reshape((1, -1) + sp))
    mult = multiplier(x_scale, w_scale, y_scale=y_scale)
    y = requantize(acc, mult.reshape((1, -1) + sp) if mult.size > 1 else mult, y_zp, y_zp.dtype)
    return np.ascontiguousarray(np.moveaxis(y, 1, -1)) if last else y


def plus_bias(acc: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """acc + bias, rounded once to acc's float type as the exact sum would be: in float32 when
    the bias is exact there too (one IEEE add of two exact values), else in float64."""
    if acc.dtype == _F32 and np.abs(bias.astype(np.int64)).max(initial=0) <= EXACT32:
        acc += bias.astype(_F32)
        return acc
    acc = acc.astype(_F64)
    acc += bias.astype(_F64)
    return acc
