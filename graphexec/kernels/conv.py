"""Conv and ConvTranspose: im2col + one batched BLAS matmul, no per-pixel loops.

Also home of the window geometry (output size and pads from kernel, strides,
dilations, pads, auto_pad, ceil_mode) that the pooling kernels share.
"""

from __future__ import annotations

import math
from itertools import product
from typing import Sequence

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from graphexec.kernels.conv2d import Geometry, fast_conv
from graphexec.kernels.quiet import is_quiet
from graphexec.kernels.registry import OpContext, Unsupported, register

_FLOATS = (np.float16, np.float32, np.float64)


def compute_dtype(x: np.ndarray, op: str) -> np.dtype:
    """float16 is computed in float32 (numpy has no fast float16 BLAS); other non-floats are left to the fallback."""
    if x.dtype.type not in _FLOATS:
        raise Unsupported(f"{op}: dtype {x.dtype}")
    return np.dtype(np.float32) if x.dtype == np.float16 else x.dtype


def spatial_ints(ctx: OpContext, name: str, nd: int, default: int) -> list[int]:
    """An int-list attribute of one value per spatial axis (``default`` when absent)."""
    v = ctx.attrs.get(name)
    if v is None:
        return [default] * nd
    v = [int(i) for i in v]
    if len(v) != nd:
        raise Unsupported(f"{ctx.op}: {name}={v} does not match {nd} spatial dims")
    return v


def explicit_pads(ctx: OpContext, nd: int) -> tuple[list[int], list[int]]:
    """``pads`` split as (begins, ends); all zero when absent."""
    pads = ctx.attrs.get("pads")
    if pads is None:
        return [0] * nd, [0] * nd
    pads = [int(p) for p in pads]
    if len(pads) != 2 * nd:
        raise Unsupported(f"{ctx.op}: pads={pads} do not match {nd} spatial dims")
    return pads[:nd], pads[nd:]


def window_geometry(ctx: OpContext, in_sp: Sequence[int], kernel: Sequence[int],
                    strides: Sequence[int], dilations: Sequence[int],
                    ceil_mode: bool = False) -> tuple[list[int], list[int], list[int]]:
    """Output spatial shape and (pads_begin, pads_end) per the ONNX spec (as onnxruntime does).

    SAME_*: out = ceil(in / stride), total pad covers the dilated kernel, the odd
    pixel goes at the end (UPPER) or the beginning (LOWER). ceil_mode drops a last
    window that would start in the end padding.
    """
    nd = len(in_sp)
    auto_pad = ctx.attr("auto_pad", "NOTSET")
    eff = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    if any(s < 1 for s in strides) or any(d < 1 for d in dilations):
        raise Unsupported(f"{ctx.op}: non-positive strides/dilations")
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        if ceil_mode:
            raise Unsupported(f"{ctx.op}: ceil_mode with auto_pad={auto_pad}")
        out = [-(-n // s) for n, s in zip(in_sp, strides)]
        total = [max(0, (o - 1) * s + e - n) for o, s, e, n in zip(out, strides, eff, in_sp)]
        small = [t // 2 for t in total]
        big = [t - t // 2 for t in total]
        return (out, small, big) if auto_pad == "SAME_UPPER" else (out, big, small)
    if auto_pad == "VALID":
        pb, pe = [0] * nd, [0] * nd
    elif auto_pad in ("NOTSET", ""):
        pb, pe = explicit_pads(ctx, nd)
    else:
        raise Unsupported(f"{ctx.op}: auto_pad={auto_pad!r}")
    if min(pb + pe, default=0) < 0:
        raise Unsupported(f"{ctx.op}: negative pads")
    out = []
    for n, b, e, k, s in zip(in_sp, pb, pe, eff, strides):
        span = n + b + e - k
        o = (-(-span // s) if ceil_mode else span // s) + 1
        if ceil_mode and (o - 1) * s >= n + b:
            o -= 1
        out.append(o)
    if min(out, default=1) < 1:
        raise Unsupported(f"{ctx.op}: empty output {out}")
    return out, pb, pe


def pad_for_windows(x: np.ndarray, out: Sequence[int], pb: Sequence[int], strides: Sequence[int],
                    eff: Sequence[int], value: float | int = 0) -> np.ndarray:
    """Pad (or crop) spatial axes so that window ``o`` starts at ``o * stride`` and every window fits."""
    nd = len(out)
    need = [(o - 1) * s + e for o, s, e in zip(out, strides, eff)]
    sp = x.shape[2:]
    if all(b == 0 for b in pb) and all(n <= m for n, m in zip(need, sp)):
        return x[(slice(None), slice(None)) + tuple(slice(0, n) for n in need)]
    xp = np.full(x.shape[:2] + tuple(need), value, dtype=x.dtype)
    dst, src = [slice(None)] * 2, [slice(None)] * 2
    for i in range(nd):
        lo, hi = pb[i], min(pb[i] + sp[i], need[i])
        dst.append(slice(lo, hi))
        src.append(slice(0, hi - lo))
    xp[tuple(dst)] = x[tuple(src)]
    return xp


def tap_slices(out: Sequence[int], strides: Sequence[int], kernel: Sequence[int],
               dilations: Sequence[int]):
    """For each kernel tap, (tap index, the spatial slices of the padded input it reads)."""
    for tap in product(*(range(k) for k in kernel)):
        yield tap, tuple(slice(t * d, t * d + (o - 1) * s + 1, s)
                         for t, d, o, s in zip(tap, dilations, out, strides))


def _im2col(xp: np.ndarray, groups: int, out: list[int], strides: list[int],
            kernel: list[int], dilations: list[int]) -> np.ndarray:
    """(N, G, Cg*K, P) column matrix of the padded input, built from one strided view."""
    n, c = xp.shape[:2]
    nd = len(out)
    axes = tuple(range(2, 2 + nd))
    if all(k == 1 for k in kernel):
        cols = xp[(slice(None), slice(None)) + tuple(slice(None, (o - 1) * s + 1, s)
                                                    for o, s in zip(out, strides))]
        return np.ascontiguousarray(cols).reshape(n, groups, c // groups, math.prod(out))
    eff = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    win = sliding_window_view(xp, eff, axis=axes)
    win = win[(slice(None), slice(None)) + tuple(slice(None, None, s) for s in strides)
              + tuple(slice(None, None, d) for d in dilations)]
    # (N, C, O..., K...) -> (N, C, K..., O...): rows of the column matrix are (c, tap).
    win = win.transpose((0, 1) + tuple(range(2 + nd, 2 + 2 * nd)) + axes)
    return win.reshape(n, groups, (c // groups) * int(np.prod(kernel)), math.prod(out))  # explicit: n may be 0


@register("Conv", out=True)
def conv(ctx: OpContext, x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None,
         out: np.ndarray | None = None) -> np.ndarray:
    """N-d convolution as im2col + one matmul whose batch dimension is the group; Inf and
    NaN inputs give IEEE results without numpy's warnings (a run has them off already:
    ``quiet.is_quiet``, no errstate of its own, 0.7 us a call)."""
    if is_quiet():
        return _conv(ctx, x, w, b, out)
    with np.errstate(all="ignore"):
        return _conv(ctx, x, w, b, out)


def _geometry(ctx: OpContext, x: np.ndarray, w: np.ndarray) -> tuple[np.dtype, int, Geometry]:
    """(compute dtype, groups, window geometry) of a Conv on these shapes, after the checks
    (``Unsupported`` for a case the fallback computes); about 4 us a call, so it is cached."""
    cdt = compute_dtype(x, "Conv")
    nd = x.ndim - 2
    if nd < 1 or w.ndim != x.ndim:
        raise Unsupported(f"Conv: ranks x={x.ndim} w={w.ndim}")
    kernel = list(w.shape[2:])
    if list(ctx.attr("kernel_shape", kernel)) != kernel:
        raise Unsupported("Conv: kernel_shape differs from W")
    groups = int(ctx.attr("group", 1))
    m, cg = w.shape[:2]
    if groups < 1 or x.shape[1] != cg * groups or m % groups:
        raise Unsupported(f"Conv: channels x={x.shape[1]} w={w.shape} group={groups}")
    strides = spatial_ints(ctx, "strides", nd, 1)
    dil = spatial_ints(ctx, "dilations", nd, 1)
    out_sp, pb, _ = window_geometry(ctx, x.shape[2:], kernel, strides, dil)
    return cdt, groups, Geometry(kernel, strides, dil, pb, out_sp)


GEOMETRIES = 16   # input shapes whose conv geometry a node keeps


def _conv(ctx: OpContext, x: np.ndarray, w: np.ndarray, b: np.ndarray | None, out: np.ndarray | None) -> np.ndarray:
    # The checks and the window geometry depend on the shapes only: with a constant filter
    # (a model's), once per node and shape; a filter fed at run time keeps nothing on the node.
    if len(ctx.const_inputs) > 1 and ctx.const_inputs[1]:
        key = ("conv.geometry", x.shape, w.shape, x.dtype)
        hit = ctx.cache.get(key)
        if hit is None:
            kept = [k for k in ctx.cache if k[0] == "conv.geometry"]   # a new shape only: rare
            if len(kept) >= GEOMETRIES:   # a node fed ever new shapes keeps the latest few
                del ctx.cache[kept[0]]
            hit = ctx.cache[key] = _geometry(ctx, x, w)
    else:
        hit = _geometry(ctx, x, w)
    cdt, groups, geo = hit
    fast = fast_conv(ctx, x, w, b, groups, geo, out)
    if fast is not None:
        return fast
    m, nd, kernel, strides, dil = w.shape[0], x.ndim - 2, geo.kernel, geo.strides, geo.dil
    out_sp, pb = geo.out, geo.begin
    eff = [(k - 1) * d + 1 for k, d in zip(kernel, dil)]
    xp = pad_for_windows(x.astype(cdt, copy=False), out_sp, pb, strides, eff)
    wc = w.astype(cdt, copy=False)
    cols = _im2col(xp, groups, out_sp, strides, kernel, dil)
    # (G, M/G, Cg*K) @ (N, G, Cg*K, P): depthwise is a batch of tiny products, still one call.
    y = np.matmul(wc.reshape(groups, m // groups, -1), cols).reshape((x.shape[0], m) + tuple(out_sp))
    if b is not None:
        y += b.astype(cdt, copy=False).reshape((1, m) + (1,) * nd)
    return y.astype(x.dtype, copy=False)


def _transpose_geometry(ctx: OpContext, in_sp: Sequence[int], kernel: list[int], strides: list[int],
                        dil: list[int]) -> tuple[list[int], list[int]]:
    """ConvTranspose output shape and begin pads, per the spec's formulas."""
    nd = len(in_sp)
    opad = spatial_ints(ctx, "output_padding", nd, 0)
    full = [s * (n - 1) + op + (k - 1) * d + 1 for s, n, op, k, d in zip(strides, in_sp, opad, kernel, dil)]
    auto_pad = ctx.attr("auto_pad", "NOTSET")
    if auto_pad not in ("NOTSET", "", "VALID", "SAME_UPPER", "SAME_LOWER"):
        raise Unsupported(f"ConvTranspose: auto_pad={auto_pad!r}")
    out_shape = ctx.attrs.get("output_shape")
    if out_shape is not None:
        out_shape = [int(v) for v in out_shape]
        if len(out_shape) != nd or any(ctx.attrs.get("pads") or []):
            raise Unsupported(f"ConvTranspose: output_shape={out_shape} with pads={ctx.attrs.get('pads')}")
    elif auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        out_shape = [n * s for n, s in zip(in_sp, strides)]
        if any(o > f for o, f in zip(out_shape, full)):
            raise Unsupported("ConvTranspose: SAME output beyond the full result (onnxruntime clamps it)")
    if out_shape is None:
        pb, pe = explicit_pads(ctx, nd) if auto_pad in ("NOTSET", "") else ([0] * nd, [0] * nd)
        if min(pb + pe, default=0) < 0:
            raise Unsupported(f"ConvTranspose: negative pads {pb + pe}")
        out = [f - b - e for f, b, e in zip(full, pb, pe)]
    else:
        total = [f - o for f, o in zip(full, out_shape)]
        pb = [t // 2 if auto_pad == "SAME_UPPER" else t - t // 2 for t in total]
        if auto_pad in ("NOTSET", ""):  # output_shape past the full result only appends zeros
            pb = [max(0, b) for b in pb]
        out = out_shape
        # A negative begin pad (SAME_*) is where onnxruntime and the reference disagree.
        if min(pb, default=0) < 0:
            raise Unsupported(f"ConvTranspose: output_shape {out_shape} needs a negative begin pad")
    if min(out, default=1) < 1:
        raise Unsupported(f"ConvTranspose: empty output {out}")
    return out, pb


@register("ConvTranspose")
def conv_transpose(ctx: OpContext, x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None) -> np.ndarray:
    """Transposed conv: one batched matmul to columns, then col2im as one strided add per kernel tap."""
    cdt = compute_dtype(x, "ConvTranspose")
    nd = x.ndim - 2
    if nd < 1 or w.ndim != x.ndim:
        raise Unsupported(f"ConvTranspose: ranks x={x.ndim} w={w.ndim}")
    kernel = list(w.shape[2:])
    if list(ctx.attr("kernel_shape", kernel)) != kernel:
        raise Unsupported("ConvTranspose: kernel_shape differs from W")
    groups = int(ctx.attr("group", 1))
    c, mg = w.shape[:2]
    n = x.shape[0]
    if groups < 1 or x.shape[1] != c or c % groups:
        raise Unsupported(f"ConvTranspose: channels x={x.shape[1]} w={w.shape} group={groups}")
    strides = spatial_ints(ctx, "strides", nd, 1)
    dil = spatial_ints(ctx, "dilations", nd, 1)
    in_sp = list(x.shape[2:])
    out, pb = _transpose_geometry(ctx, in_sp, kernel, strides, dil)
    opad = spatial_ints(ctx, "output_padding", nd, 0)
    k = int(np.prod(kernel))
    wt = w.astype(cdt, copy=False).reshape(groups, c // groups, mg * k).transpose(0, 2, 1)
    xs = x.astype(cdt, copy=False).reshape(n, groups, c // groups, math.prod(in_sp))
    cols = np.matmul(wt, xs).reshape((n, groups * mg) + tuple(kernel) + tuple(in_sp))
    full = [(i - 1) * s + (kk - 1) * d + 1 for i, s, kk, d in zip(in_sp, strides, kernel, dil)]
    size = [max(f + op, p + o) for f, op, p, o in zip(full, opad, pb, out)]
    buf = np.zeros((n, groups * mg) + tuple(size), dtype=cdt)
    for tap in product(*(range(kk) for kk in kernel)):
        sl = tuple(slice(t * d, t * d + (i - 1) * s + 1, s) for t, d, i, s in zip(tap, dil, in_sp, strides))
        buf[(slice(None), slice(None)) + sl] += cols[(slice(None), slice(None)) + tap]
    y = buf[(slice(None), slice(None)) + tuple(slice(p, p + o) for p, o in zip(pb, out))]
    if b is not None:
        y = y + b.astype(cdt, copy=False).reshape((1, -1) + (1,) * nd)
    return np.ascontiguousarray(y).astype(x.dtype, copy=False)
