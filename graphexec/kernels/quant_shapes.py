"""Output types of the quantized com.microsoft ops, which onnx's shape inference does not
know: without them their outputs have no static shape, so the cube ops would lose their
M, N, K (and be costed as vector work) and the memory planner their bytes.

A rule sees the types of the inputs present (an omitted optional input is skipped, so a
later input moves up one place) and the node's attributes; it returns ``TensorType()``
(unknown) for anything it cannot tell, leaving the kernel to report bad inputs.
"""

from __future__ import annotations

from functools import wraps
from typing import Any, Callable

import numpy as np

from graphexec.ir import TensorType
from graphexec.kernels.conv import spatial_ints, window_geometry
from graphexec.kernels.registry import OpContext, Unsupported

Rule = Callable[..., TensorType]
_F32 = np.dtype(np.float32)
_INT8 = (np.dtype(np.int8), np.dtype(np.uint8))


def _safe(rule: Rule) -> Rule:
    @wraps(rule)
    def safe(*ins: TensorType, **attrs: Any) -> TensorType:
        try:
            return rule(*ins, **attrs)
        except (ValueError, IndexError, TypeError, KeyError, Unsupported):
            return TensorType()

    return safe


def _shape(t: TensorType) -> tuple[int, ...]:
    dims = tuple(d for d in t.shape or () if isinstance(d, int))
    if t.shape is None or len(dims) != len(t.shape):
        raise ValueError(f"{t} is not static")   # rules run on static types only
    return dims


@_safe
def like_input(x: TensorType, *rest: TensorType, **attrs: Any) -> TensorType:
    return x


@_safe
def quantize(x: TensorType, scale: TensorType, *zp: TensorType, **attrs: Any) -> TensorType:
    return TensorType(zp[0].dtype if zp else np.dtype(np.uint8), x.shape)


@_safe
def dequantize(x: TensorType, scale: TensorType, *zp: TensorType, **attrs: Any) -> TensorType:
    return TensorType(scale.dtype, x.shape)


@_safe
def binary(*ins: TensorType, **attrs: Any) -> TensorType:
    """QLinearAdd/Mul: A, A_scale, [A_zp], B, ...: B is the 8-bit input after A's parameters."""
    b = ins[3] if ins[3].dtype in _INT8 else ins[2]
    return TensorType(ins[0].dtype, np.broadcast_shapes(_shape(ins[0]), _shape(b)))


@_safe
def concat(y_s: TensorType, y_zp: TensorType, *parts: TensorType, axis: int = 0, **attrs: Any) -> TensorType:
    shapes = [_shape(t) for t in parts[::3]]
    a = axis % len(shapes[0])
    return TensorType(y_zp.dtype, shapes[0][:a] + (sum(s[a] for s in shapes),) + shapes[0][a + 1:])


@_safe
def global_pool(x: TensorType, *rest: TensorType, channels_last: int = 0, **attrs: Any) -> TensorType:
    s = _shape(x)
    keep = (0, len(s) - 1) if channels_last else (0, 1)
    return TensorType(x.dtype, tuple(d if i in keep else 1 for i, d in enumerate(s)))


def _nchw(s: tuple[int, ...], last: bool) -> tuple[int, ...]:
    return (s[0], s[-1]) + s[1:-1] if last else s


def _back(s: tuple[int, ...], last: bool) -> tuple[int, ...]:
    return (s[0],) + s[2:] + (s[1],) if last else s


@_safe
def average_pool(x: TensorType, *rest: TensorType, **attrs: Any) -> TensorType:
    last = bool(attrs.get("channels_last", 0))
    s = _nchw(_shape(x), last)
    kernel = [int(k) for k in attrs["kernel_shape"]]
    ctx = OpContext("QLinearAveragePool", attrs)
    nd = len(s) - 2
    out, _, _ = window_geometry(ctx, s[2:], kernel, spatial_ints(ctx, "strides", nd, 1), [1] * nd,
                                bool(attrs.get("ceil_mode", 0)))
    return TensorType(x.dtype, _back(s[:2] + tuple(out), last))


@_safe
def qlinear_conv(x: TensorType, xs: TensorType, xz: TensorType, w: TensorType, ws: TensorType, wz: TensorType,
                 ys: TensorType, yz: TensorType, *bias: TensorType, **attrs: Any) -> TensorType:
    last = bool(attrs.get("channels_last", 0))
    s, ws_ = _nchw(_shape(x), last), _shape(w)
    ctx = OpContext("QLinearConv", attrs)
    nd = len(s) - 2
    out, _, _ = window_geometry(ctx, s[2:], list(ws_[2:]), spatial_ints(ctx, "strides", nd, 1),
                                spatial_ints(ctx, "dilations", nd, 1))
    return TensorType(yz.dtype, _back((s[0], ws_[0]) + tuple(out), last))


def _matmul(a: TensorType, b: TensorType) -> tuple[int, ...]:
    sa, sb = _shape(a), _shape(b)
    if len(sa) < 2 or len(sb) < 2:
        raise ValueError("1-D operands")
    return np.broadcast_shapes(sa[:-2], sb[:-2]) + (sa[-2], sb[-1])


@_safe
def matmul_integer_to_float(a: TensorType, b: TensorType, a_s: TensorType, *rest: TensorType,
                            **attrs: Any) -> TensorType:
    return TensorType(a_s.dtype, _matmul(a, b))


@_safe
def dynamic_quantize_matmul(a: TensorType, b: TensorType, *rest: TensorType, **attrs: Any) -> TensorType:
    return TensorType(_F32, _matmul(a, b))


@_safe
def qgemm(a: TensorType, a_s: TensorType, a_zp: TensorType, b: TensorType, *rest: TensorType,
          **attrs: Any) -> TensorType:
    """(M, N); quantized when y_scale is given: a float input after B's scale (C is int32)."""
    sa, sb = _shape(a), _shape(b)
    m = sa[1] if attrs.get("transA", 0) else sa[0]
    n = sb[0] if attrs.get("transB", 0) else sb[1]
    quantized = any(t.dtype == _F32 for t in rest[1:])
    return TensorType(rest[-1].dtype if quantized and rest[-1].dtype in _INT8 else
                      (np.dtype(np.uint8) if quantized else _F32), (m, n))


@_safe
def matmul_nbits(a: TensorType, *rest: TensorType, **attrs: Any) -> TensorType:
    return TensorType(a.dtype, _shape(a)[:-1] + (int(attrs["N"]),))
