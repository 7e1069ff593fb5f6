"""QuantizeLinear, DequantizeLinear and DynamicQuantizeLinear (ONNX and com.microsoft).

The scale and zero point are per tensor (a scalar or one element), per axis (1-D along
``axis``) or blocked (the input's shape with ``ceil(D / block_size)`` along ``axis``).
Quantizing divides in float32 (float16 and bfloat16 inputs too: onnxruntime does, and a
float16 quotient would round twice before ``rint``), rounds half to even, adds the zero
point and saturates; NaN becomes the type's lowest value, as onnxruntime's does.
Float8 targets clip to their largest finite value when ``saturate`` (inf too) and cast
as IEEE otherwise (NaN, or inf for e5m2); float4e2m1 always saturates.
"""

from __future__ import annotations

import math
from functools import wraps
from typing import Any, Callable

import numpy as np
from onnx import TensorProto, helper

from graphexec import _switch
from graphexec.errors import UnsupportedOpError
from graphexec.kernels import quant_shapes as shapes
from graphexec.kernels import scratch
from graphexec.kernels.custom import CustomKernel
from graphexec.kernels.registry import KernelFn, OpContext, Unsupported, fits, register

MS = "com.microsoft"
_F32 = np.dtype(np.float32)


def ms_register(op: str, shape: Callable[..., Any] | None = None) -> Callable[[KernelFn], KernelFn]:
    """Register ``fn`` as com.microsoft's ``op`` too, with ``shape`` (``quant_shapes``) as its
    output types, which onnx's inference cannot give. onnx's reference cannot run that domain
    either, so a case ``fn`` leaves to the fallback (``Unsupported``) fails naming the node."""

    def wrap(fn: KernelFn) -> KernelFn:
        @wraps(fn)
        def ms(ctx: OpContext, *xs: Any) -> Any:
            try:
                return fn(ctx, *xs)
            except Unsupported as e:
                raise UnsupportedOpError(f"node {ctx.name or '<unnamed>'} ({MS}::{op}): {e}") from None

        register(op, domain=MS, rules=None if shape is None else CustomKernel(op, MS, fn, shape, None))(ms)
        return fn

    return wrap


def _np(t: int) -> np.dtype:
    return np.dtype(helper.tensor_dtype_to_np_dtype(t))


INT_RANGES: dict[np.dtype, tuple[int, int]] = {
    _np(TensorProto.UINT8): (0, 255), _np(TensorProto.INT8): (-128, 127),
    _np(TensorProto.UINT16): (0, 65535), _np(TensorProto.INT16): (-32768, 32767),
    _np(TensorProto.UINT4): (0, 15), _np(TensorProto.INT4): (-8, 7),
    _np(TensorProto.UINT2): (0, 3), _np(TensorProto.INT2): (-2, 1),
}
# largest finite value of each small float type (the spec's saturation bound)
FLOAT_MAX: dict[np.dtype, float] = {
    _np(TensorProto.FLOAT8E4M3FN): 448.0, _np(TensorProto.FLOAT8E4M3FNUZ): 240.0,
    _np(TensorProto.FLOAT8E5M2): 57344.0, _np(TensorProto.FLOAT8E5M2FNUZ): 57344.0,
}
_FLOAT4 = _np(TensorProto.FLOAT4E2M1)
_qlinear = _switch.compiled("graphexec.kernels._qlinear", 1)   # None: numpy's passes
_I8 = np.dtype(np.int8)
_BYTES = (np.dtype(np.uint8), _I8)
_CLIP: Any = np._core.umath.clip  # type: ignore[attr-defined]
_DEQUANT_IN = set(INT_RANGES) | set(FLOAT_MAX) | {_FLOAT4, np.dtype(np.int32)}
_DEQUANT_OUT = {_F32, np.dtype(np.float16), _np(TensorProto.BFLOAT16)}


def expand_param(p: np.ndarray, shape: tuple[int, ...], axis: int, block: int = 0) -> np.ndarray:
    """A scale or zero point broadcastable to ``shape``: per tensor, per axis, or blocked.

    Raises:
        ValueError: ``p`` fits none of the three layouts.
    """
    if p.size == 1:
        return p.reshape(())
    if not -len(shape) <= axis < len(shape):
        raise ValueError(f"axis {axis} out of range for rank {len(shape)}")
    a = axis % len(shape)
    if not block:
        if p.ndim != 1 or p.shape[0] != shape[a]:
            raise ValueError(f"per-axis parameter of shape {p.shape} does not match axis {a} of {shape}")
        return p.reshape([-1 if i == a else 1 for i in range(len(shape))])
    want = shape[:a] + (math.ceil(shape[a] / block),) + shape[a + 1:]
    if block < 0 or p.shape != want:
        raise ValueError(f"blocked parameter of shape {p.shape}: {shape} in blocks of {block} "
                         f"along axis {a} needs {want}")
    return np.repeat(p, block, axis=a)[(slice(None),) * a + (slice(0, shape[a]),)]


def quantize(v: np.ndarray, dtype: np.dtype, zp: Any = None, saturate: bool = True,
             inplace: bool = False, nan_free: bool = False, out: np.ndarray | None = None) -> np.ndarray:
    """``v`` (already divided by the scale) plus ``zp``, rounded and saturated into ``dtype``;
    ``inplace`` lets it overwrite ``v`` (a temporary of the caller's) instead of a copy, and
    ``nan_free`` (the caller knows ``v`` holds no NaN) skips the pass that looks for one.
    An integer result goes into ``out`` when it fits (the same cast as ``astype``)."""
    if dtype in INT_RANGES:
        lo, hi = INT_RANGES[dtype]
        r = np.rint(v, out=v) if inplace and isinstance(v, np.ndarray) else np.asarray(np.rint(v))
        if zp is not None:
            r += zp
        # clip, not fmax/fmin with a scalar: 4x faster, but it keeps NaN, which ends at lo
        # (like onnxruntime's); min() is NaN when any is. The ufunc itself: np.clip's Python
        # wrappers cost more than the clip on a small tensor
        _CLIP(r, lo, hi, out=r)
        if not nan_free and r.size and np.isnan(r.min()):
            r[np.isnan(r)] = lo
        if fits(out, r.shape, dtype):
            np.copyto(out, r, casting="unsafe")
            return out
        return r.astype(dtype)
    if zp is not None:
        v = v + np.asarray(zp).astype(v.dtype)
    if dtype == _FLOAT4 or (saturate and dtype in FLOAT_MAX):
        bound = FLOAT_MAX.get(dtype, 6.0)
        v = np.clip(v, -bound, bound)   # NaN stays NaN
    elif dtype not in FLOAT_MAX:
        raise Unsupported(f"QuantizeLinear: output type {dtype}")
    return v.astype(dtype)


def _out_dtype(ctx: OpContext, zp: np.ndarray | None) -> np.dtype:
    attr = int(ctx.attr("output_dtype", 0))
    if zp is not None:
        if attr and _np(attr) != zp.dtype:
            raise ValueError(f"output_dtype {_np(attr)} differs from the zero point's {zp.dtype}")
        return zp.dtype
    return _np(attr) if attr else np.dtype(np.uint8)


def _params(ctx: OpContext, kind: str, x: np.ndarray, scale: np.ndarray, zp: np.ndarray | None,
            make: Callable[[], tuple[Any, ...]]) -> tuple[Any, ...]:
    """``make()``'s per-node parameters (the scale and zero point expanded to ``x``'s shape,
    converted), kept on the node when both are constants of the graph: the same arrays,
    worked out once instead of at every run (several small numpy calls each)."""
    consts = ctx.const_inputs
    constant = len(consts) > 1 and consts[1] and (zp is None or (len(consts) > 2 and consts[2]))
    if not constant:
        return make()
    key = (kind, x.shape)
    hit = ctx.cache.get(key)
    if hit is None:
        hit = ctx.cache[key] = make()
    return hit


@register("QuantizeLinear", since=10, out=True)
@ms_register("QuantizeLinear", shapes.quantize)
def quantize_linear(ctx: OpContext, x: np.ndarray, scale: np.ndarray, zp: np.ndarray | None = None,
                    out: np.ndarray | None = None) -> np.ndarray:
    """y = saturate(rint(x / scale) + zp); the division in float32 unless ``precision`` says otherwise.
    A float32 input to an integer type divides into a kept scratch buffer and casts into
    ``out`` (the same operations, so the same bits; best of 100 alternating runs it is as fast
    as the fresh arrays and the executor's copy, 1x6x400x400: 473 vs 498 us)."""
    def make() -> tuple[Any, ...]:
        dtype = _out_dtype(ctx, zp)
        axis, block = int(ctx.attr("axis", 1)), int(ctx.attr("block_size", 0))
        precision = int(ctx.attr("precision", 0))
        cdt = _np(precision) if precision else _F32
        s = expand_param(scale, x.shape, axis, block).astype(cdt)
        z = None if zp is None else expand_param(zp, x.shape, axis, block).astype(_F32)
        return dtype, cdt, s, z, bool(ctx.attr("saturate", 1))

    dtype, cdt, s, z, saturate = _params(ctx, "q", x, scale, zp, make)
    if x.dtype == cdt == _F32 and _one_pass(x, dtype, s, z):
        y = out if fits(out, x.shape, dtype) and out.flags.c_contiguous else np.empty(x.shape, dtype)
        _qlinear.quantize(x, y, float(s.reshape(-1)[0]), 0.0 if z is None else float(z.reshape(-1)[0]),
                          dtype == _I8)
        return y
    with np.errstate(all="ignore"):
        if x.dtype == cdt == _F32 and dtype in INT_RANGES and _within(x, s):
            v = np.divide(x, s, out=scratch.buffer("quant.v", x.shape, _F32))
            return quantize(v, dtype, z, saturate, inplace=True, out=out)
        v = ((x if x.dtype == cdt else x.astype(cdt)) / s).astype(_F32, copy=False)
        return quantize(v, dtype, z, saturate, inplace=True)


@register("DequantizeLinear", since=10, out=True)
@ms_register("DequantizeLinear", shapes.dequantize)
def dequantize_linear(ctx: OpContext, x: np.ndarray, scale: np.ndarray, zp: np.ndarray | None = None,
                      out: np.ndarray | None = None) -> np.ndarray:
    """y = (x - zp) * scale in float32, rounded once to the output type (the scale's or ``output_dtype``);
    a float32 result is computed in ``out`` when it fits (the same steps, no fresh array and
    no copy into the output's bytes: 1x400x1536 int8, 167 -> 111 us best of 100 alternating)."""
    def make() -> tuple[Any, ...]:
        attr = int(ctx.attr("output_dtype", 0))
        dtype = _np(attr) if attr else scale.dtype
        if x.dtype not in _DEQUANT_IN or dtype not in _DEQUANT_OUT:
            raise Unsupported(f"DequantizeLinear: {x.dtype} to {dtype}")
        axis, block = int(ctx.attr("axis", 1)), int(ctx.attr("block_size", 0))
        z = None if zp is None else expand_param(zp, x.shape, axis, block).astype(_F32)
        return dtype, z, expand_param(scale, x.shape, axis, block).astype(_F32)

    dtype, z, s = _params(ctx, "dq", x, scale, zp, make)
    if dtype == _F32 and _one_pass(x, x.dtype, s, z):
        y = out if fits(out, x.shape, _F32) and out.flags.c_contiguous and not np.may_share_memory(out, x) \
            else np.empty(x.shape, _F32)
        _qlinear.dequantize(x, y, float(s.reshape(-1)[0]), 0.0 if z is None else float(z.reshape(-1)[0]),
                            x.dtype == _I8)
        return y
    if fits(out, x.shape, dtype) and dtype == _F32 and not np.may_share_memory(out, x) and _within(x, z) \
            and _within(x, s):
        return _dequantize(x, z, s, out)
    return _dequantize(x, z, s, None).astype(dtype, copy=False)


def _one_pass(x: np.ndarray, dtype: np.dtype, s: np.ndarray, z: np.ndarray | None) -> bool:
    """Whether the compiled one-pass (de)quantization (``_qlinear.c``: numpy's operations in
    its order, so the same bytes, 2-5x faster) serves: built, fast paths on, an 8-bit type,
    one scale and zero point (float32), x C-contiguous."""
    return _qlinear is not None and _switch.FAST and dtype in _BYTES and x.flags.c_contiguous \
        and np.size(s) == 1 and s.dtype == _F32 and (z is None or (np.size(z) == 1 and z.dtype == _F32))


def _within(x: np.ndarray, p: np.ndarray | None) -> bool:
    """Whether ``p`` broadcasts into ``x``'s shape (the result of x with p is x's shape)."""
    return p is None or np.ndim(p) == 0 or (np.ndim(p) <= x.ndim
                                            and np.broadcast_shapes(x.shape, np.shape(p)) == x.shape)


def _dequantize(x: np.ndarray, z: np.ndarray | None, s: np.ndarray, out: np.ndarray | None) -> np.ndarray:
    """(x - z) * s in float32, in ``out`` when given (astype's cast into it), else a new array."""
    if out is None:
        v = x.astype(_F32)
    else:
        np.copyto(out, x, casting="unsafe")
        v = out
    if z is not None:
        v -= z
    v *= s
    return v


def dynamic_uint8(x: np.ndarray) -> tuple[np.ndarray, np.float32, np.uint8]:
    """Quantize float32 ``x`` to uint8 over its range widened to hold 0: (y, scale, zero point).

    An all-zero ``x`` gets scale 1 (as in onnxruntime; the spec's formula divides by zero).
    """
    x = x.astype(_F32, copy=False)
    mn, mx = (x.min(), x.max()) if x.size else (np.float32(0), np.float32(0))
    lo, hi = min(np.float32(0), mn), max(np.float32(0), mx)
    scale = np.float32((hi - lo) / np.float32(255)) if hi != lo else np.float32(1)
    zp = np.uint8(np.clip(np.rint(np.float32(0) - lo / scale), 0, 255))
    # min and max are NaN when any element is; finite ones bound |x / scale| by about 255
    nan_free = bool(np.isfinite(mn) and np.isfinite(mx) and 0 < scale < np.inf)
    with np.errstate(all="ignore"):
        y = quantize(x / scale, np.dtype(np.uint8), np.float32(zp), inplace=True, nan_free=nan_free)
    return y, scale, zp


@register("DynamicQuantizeLinear", since=11)
def dynamic_quantize_linear(ctx: OpContext, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if x.dtype != _F32:
        raise Unsupported(f"DynamicQuantizeLinear: {x.dtype}")
    y, scale, zp = dynamic_uint8(x)
    return y, np.asarray(scale), np.asarray(zp)
