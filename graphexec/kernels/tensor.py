"""Shape and data-movement kernels: Concat, Split, Slice, Gather*, Scatter*, Pad, TopK, ...

Pure data movement works on any dtype (views where numpy gives them); kernels that
compute on values restrict themselves to plain numpy dtypes. Inputs the spec calls
errors (bad axes, out-of-range indices) raise ``Unsupported`` so that the reference
fallback reports them the usual way.
"""

from __future__ import annotations

from functools import wraps
from typing import Any, Callable

import numpy as np

from graphexec.kernels.registry import OpContext, Unsupported, fits, register


def _kernel(op: str, since: int = 1, out: bool = False) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register ``fn``; 0-d results are returned as ndarrays, never numpy scalars."""

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        @wraps(fn)
        def kernel(ctx: OpContext, *xs: Any, **kw: Any) -> Any:
            res = fn(ctx, *xs, **kw)
            if isinstance(res, tuple):
                return tuple(np.asarray(o) for o in res)
            return res if isinstance(res, np.ndarray) else np.asarray(res)

        register(op, since=since, out=out)(kernel)
        return fn

    return wrap


def _need(cond: Any, why: str) -> None:
    if not cond:
        raise Unsupported(why)


def _axis(op: str, axis: int, rank: int) -> int:
    _need(-rank <= axis < rank, f"{op}: axis {axis} out of range for rank {rank}")
    return axis + rank if axis < 0 else axis


def _ints(x: Any) -> list[int]:
    return [] if x is None else [int(v) for v in np.asarray(x).reshape(-1)]


def _num(op: str, *xs: np.ndarray) -> None:
    _need(all(x.dtype.kind in "biuf" for x in xs), f"{op}: dtype {[x.dtype for x in xs]}")


def _indices(op: str, idx: np.ndarray, dim: int | np.ndarray) -> np.ndarray:
    """Wrap negative indices; out-of-range ones are errors left to the fallback."""
    _need(idx.dtype.kind in "iu", f"{op}: index dtype {idx.dtype}")
    if idx.size and np.ndim(dim) == 0:   # one bound: two reductions say whether anything needs wrapping
        lo, hi = idx.min(), idx.max()
        if lo >= 0:
            _need(hi < dim, f"{op}: index out of range")
            return idx.astype(np.int64, copy=False)
        _need(lo >= -dim and hi < dim, f"{op}: index out of range")
        return np.where(idx < 0, idx + dim, idx).astype(np.int64, copy=False)
    idx = np.where(idx < 0, idx + dim, idx)
    _need(not idx.size or not ((idx < 0) | (idx >= dim)).any(), f"{op}: index out of range")
    return idx.astype(np.int64, copy=False)


# ---------------------------------------------------------------- shape ops
@register("Identity")
def identity(ctx: OpContext, x: Any) -> Any:
    """Passes tensors, sequences (lists) and optionals through untouched."""
    return x


_SIMPLE: dict[str, Callable[[OpContext, np.ndarray], np.ndarray]] = {
    # Shape's start/end (opset 15) clamp exactly like python slicing.
    "Shape": lambda ctx, x: np.array(x.shape[ctx.attr("start", 0):ctx.attr("end", None)], dtype=np.int64),
    "Size": lambda ctx, x: np.array(x.size, dtype=np.int64),
    "Transpose": lambda ctx, x: np.transpose(x, ctx.attr("perm", None)),
}
for _op, _f in _SIMPLE.items():
    _kernel(_op)(_f)


@_kernel("Reshape", since=5)
def reshape(ctx: OpContext, x: np.ndarray, shape: np.ndarray) -> np.ndarray:
    """0 copies the input dim unless allowzero=1; -1 is inferred."""
    dims = _ints(shape)
    if ctx.attr("allowzero", 0):
        _need(not (0 in dims and -1 in dims), "Reshape: allowzero with both 0 and -1")
    else:
        _need(all(d != 0 or i < x.ndim for i, d in enumerate(dims)), "Reshape: 0 beyond the input rank")
        dims = [x.shape[i] if d == 0 else d for i, d in enumerate(dims)]
    return x.reshape(dims)


@_kernel("Flatten")
def flatten(ctx: OpContext, x: np.ndarray) -> np.ndarray:
    axis = ctx.attr("axis", 1)
    axis = axis + x.ndim if axis < 0 else axis
    _need(0 <= axis <= x.ndim, f"Flatten: axis {axis}")
    return x.reshape(int(np.prod(x.shape[:axis])), int(np.prod(x.shape[axis:])))


@_kernel("Squeeze")
def squeeze(ctx: OpContext, x: np.ndarray, axes: np.ndarray | None = None) -> np.ndarray:
    """Axes: attribute before opset 13, optional input from 13; none squeezes every 1."""
    _need(ctx.opset < 13 or axes is None or axes.size, "Squeeze: empty axes input")
    ax = [_axis("Squeeze", a, x.ndim) for a in _ints(ctx.attr("axes", None) if ctx.opset < 13 else axes)]
    _need(len(set(ax)) == len(ax) and all(x.shape[a] == 1 for a in ax), f"Squeeze: axes {ax} for {x.shape}")
    return np.squeeze(x, axis=tuple(ax)) if ax else np.squeeze(x)


@_kernel("Unsqueeze")
def unsqueeze(ctx: OpContext, x: np.ndarray, axes: np.ndarray | None = None) -> np.ndarray:
    ax = _ints(ctx.attr("axes", None) if ctx.opset < 13 else axes)
    ax = [_axis("Unsqueeze", a, x.ndim + len(ax)) for a in ax]
    _need(ax and len(set(ax)) == len(ax), f"Unsqueeze: axes {ax}")
    return np.expand_dims(x, tuple(ax))


@_kernel("Expand", since=8)
def expand(ctx: OpContext, x: np.ndarray, shape: np.ndarray) -> np.ndarray:
    """Bidirectional broadcast as a read-only view: no copy until someone stores it."""
    return np.broadcast_to(x, np.broadcast_shapes(x.shape, tuple(_ints(shape))))


@_kernel("Tile", since=6)
def tile(ctx: OpContext, x: np.ndarray, repeats: np.ndarray) -> np.ndarray:
    reps = _ints(repeats)
    _need(len(reps) == x.ndim and min(reps, default=0) >= 0, "Tile: one non-negative repeat per axis")
    return np.tile(x, reps)


@_kernel("ConstantOfShape", since=9, out=True)
def constant_of_shape(ctx: OpContext, shape: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    value = np.asarray(ctx.attr("value", np.zeros(1, dtype=np.float32)))
    _need(value.size == 1, "ConstantOfShape: value must hold one element")
    dims = tuple(_ints(shape))
    if fits(out, dims, value.dtype):   # a big constant left to run time: filled in place
        out.fill(value.reshape(-1)[0])
        return out
    return np.full(dims, value.reshape(-1)[0], dtype=value.dtype)


@_kernel("Concat", out=True)
def concat(ctx: OpContext, *xs: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    xs = tuple(x for x in xs if x is not None)
    _need(xs and xs[0].ndim and all(x.dtype == xs[0].dtype for x in xs), "Concat: rank >= 1, one dtype")
    axis = _axis("Concat", ctx.attr("axis"), xs[0].ndim)
    if out is not None and out.dtype == xs[0].dtype and all(x.ndim == out.ndim for x in xs) \
            and sum(x.shape[axis] for x in xs) == out.shape[axis] \
            and all(x.shape[:axis] + x.shape[axis + 1:] == out.shape[:axis] + out.shape[axis + 1:] for x in xs):
        return np.concatenate(xs, axis=axis, out=out)
    return np.concatenate(xs, axis=axis)


@_kernel("Split", since=2)
def split(ctx: OpContext, x: np.ndarray, split_in: np.ndarray | None = None) -> tuple[np.ndarray, ...]:
    """Sizes: attribute (<13) or input; else equal parts, the last one smaller with num_outputs (18+)."""
    axis = _axis("Split", ctx.attr("axis", 0), x.ndim)
    dim, n = x.shape[axis], ctx.num_outputs
    sizes = _ints(ctx.attr("split", None) if ctx.opset < 13 else split_in)
    if not sizes and ctx.opset >= 18 and "num_outputs" in ctx.attrs:
        n = ctx.attrs["num_outputs"]
        chunk = -(-dim // n)
        sizes = [chunk] * (n - 1) + [dim - chunk * (n - 1)]
    elif not sizes:
        _need(dim % n == 0, f"Split: {dim} not divisible into {n} parts")
        sizes = [dim // n] * n
    _need(sum(sizes) == dim and min(sizes) >= 0 and len(sizes) == ctx.num_outputs, f"Split: sizes {sizes}")
    return tuple(np.split(x, np.cumsum(sizes)[:-1], axis=axis))


@_kernel("Slice")
def slice_(ctx: OpContext, x: np.ndarray, *args: np.ndarray | None) -> np.ndarray:
    """ONNX clamping; with a negative step an end of -1 means "before index 0"."""
    # the raw arguments (attributes or inputs) get their own names: the lists below are list[int]
    if ctx.opset < 10:
        starts_in, ends_in, axes_in, steps_in = ctx.attr("starts"), ctx.attr("ends"), ctx.attr("axes", None), None
    else:
        starts_in, ends_in, axes_in, steps_in = (list(args) + [None, None])[:4]
    starts, ends = _ints(starts_in), _ints(ends_in)
    axes = list(range(len(starts))) if axes_in is None else _ints(axes_in)
    steps = [1] * len(starts) if steps_in is None else _ints(steps_in)
    _need(len(starts) == len(ends) == len(axes) == len(steps), "Slice: argument lengths differ")
    index = [slice(None)] * x.ndim
    for s, e, a, st in zip(starts, ends, axes, steps):
        a = _axis("Slice", a, x.ndim)
        _need(st != 0 and index[a] == slice(None), "Slice: zero step or repeated axis")
        dim = x.shape[a]
        s, e = (s + dim if s < 0 else s), (e + dim if e < 0 else e)
        if dim == 0:
            s, e = 0, 0
        elif st > 0:
            s, e = min(max(s, 0), dim), min(max(e, 0), dim)
        else:
            s, e = min(max(s, 0), dim - 1), min(max(e, -1), dim - 1)
        index[a] = slice(s, None if e < 0 else e, st)
    return x[tuple(index)]


@_kernel("Pad")
def pad(ctx: OpContext, x: np.ndarray, pads_in: np.ndarray | None = None,
        value_in: np.ndarray | None = None, axes_in: np.ndarray | None = None) -> np.ndarray:
    """Modes constant/reflect/edge/wrap; negative pads crop (constant mode only)."""
    mode = ctx.attr("mode", "constant")
    if ctx.opset < 11:
        pads, value, axes = _ints(ctx.attr("pads" if ctx.opset > 1 else "paddings")), ctx.attr("value", 0.0), None
    else:
        pads, axes = _ints(pads_in), (None if axes_in is None else _ints(axes_in))
        value = 0 if value_in is None or value_in.size == 0 else value_in.reshape(-1)[0]
    axes = list(range(x.ndim)) if axes is None else [_axis("Pad", a, x.ndim) for a in axes]
    _need(len(pads) == 2 * len(axes) and len(set(axes)) == len(axes), f"Pad: pads {pads} axes {axes}")
    _need(mode in ("constant", "reflect", "edge", "wrap"), f"Pad: mode {mode}")
    width = [(0, 0)] * x.ndim
    for i, a in enumerate(axes):
        width[a] = (pads[i], pads[i + len(axes)])
    if any(p < 0 for w in width for p in w):
        _need(mode == "constant" and all(-min(b, 0) - min(e, 0) <= d for (b, e), d in zip(width, x.shape)),
              "Pad: negative pads only crop in constant mode")
        x = x[tuple(slice(-min(b, 0), d + min(e, 0)) for (b, e), d in zip(width, x.shape))]
        width = [(max(b, 0), max(e, 0)) for b, e in width]
    if mode == "constant":
        _num("Pad", x)
        return np.pad(x, width, mode="constant", constant_values=np.asarray(value).astype(x.dtype))
    _need(all(w == (0, 0) or d for w, d in zip(width, x.shape)), f"Pad: {mode} padding of an empty axis")
    return np.pad(x, width, mode=mode)


# ---------------------------------------------------------------- gather / scatter
@_kernel("Gather")
def gather(ctx: OpContext, x: np.ndarray, idx: np.ndarray) -> np.ndarray:
    axis = _axis("Gather", ctx.attr("axis", 0), x.ndim)
    return np.take(x, _indices("Gather", idx, x.shape[axis]), axis=axis)


@_kernel("GatherElements", since=11)
def gather_elements(ctx: OpContext, x: np.ndarray, idx: np.ndarray) -> np.ndarray:
    axis = _axis("GatherElements", ctx.attr("axis", 0), x.ndim)
    _need(idx.ndim == x.ndim, "GatherElements: rank mismatch")
    return np.take_along_axis(x, _indices("GatherElements", idx, x.shape[axis]), axis=axis)


@_kernel("GatherND", since=11)
def gather_nd(ctx: OpContext, x: np.ndarray, idx: np.ndarray) -> np.ndarray:
    b, k = ctx.attr("batch_dims", 0), (idx.shape[-1] if idx.ndim else 0)
    _need(k >= 1 and b + k <= x.ndim and idx.shape[:b] == x.shape[:b], "GatherND: bad shapes")
    nb = int(np.prod(x.shape[:b]))
    ind = _indices("GatherND", idx.reshape(nb, -1, k), np.array(x.shape[b:b + k]))
    out = x.reshape((nb,) + x.shape[b:])[(np.arange(nb)[:, None],) + tuple(ind[..., j] for j in range(k))]
    return out.reshape(idx.shape[:-1] + x.shape[b + k:])


_REDUCE_AT = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


def _scatter(op: str, ctx: OpContext, out: np.ndarray, where: np.ndarray, upd: np.ndarray) -> np.ndarray:
    """Apply ``upd`` at rows/elements ``where`` of ``out`` (a fresh copy), honouring reduction."""
    red = ctx.attr("reduction", "none")
    if red == "none":
        out[where] = upd  # duplicate indices: the last update wins, as in the reference loop
    else:
        _need(red in _REDUCE_AT, f"{op}: reduction {red}")
        _num(op, out)
        _REDUCE_AT[red].at(out, where, upd)
    return out


@_kernel("ScatterElements", since=11)
def scatter_elements(ctx: OpContext, x: np.ndarray, idx: np.ndarray, upd: np.ndarray) -> np.ndarray:
    axis = _axis("ScatterElements", ctx.attr("axis", 0), x.ndim)
    _need(idx.shape == upd.shape and idx.ndim == x.ndim and upd.dtype == x.dtype, "ScatterElements: mismatch")
    _need(all(i <= d for a, (i, d) in enumerate(zip(idx.shape, x.shape)) if a != axis), "ScatterElements: shape")
    grid: list[np.ndarray] = list(np.indices(idx.shape, sparse=True))
    grid[axis] = _indices("ScatterElements", idx, x.shape[axis])
    coords = tuple(np.broadcast_arrays(*grid))
    flat = np.ravel_multi_index(coords, x.shape).reshape(-1)
    out = np.array(x, copy=True).reshape(-1)
    return _scatter("ScatterElements", ctx, out, flat, upd.reshape(-1)).reshape(x.shape)


@_kernel("ScatterND", since=11)
def scatter_nd(ctx: OpContext, x: np.ndarray, idx: np.ndarray, upd: np.ndarray) -> np.ndarray:
    k = idx.shape[-1] if idx.ndim else 0
    _need(1 <= k <= x.ndim and upd.shape == idx.shape[:-1] + x.shape[k:] and upd.dtype == x.dtype,
          "ScatterND: shape/dtype mismatch")
    ind = _indices("ScatterND", idx.reshape(-1, k), np.array(x.shape[:k], dtype=np.int64))
    rows = np.ravel_multi_index(tuple(ind.T), x.shape[:k])
    out = np.array(x, copy=True).reshape((int(np.prod(x.shape[:k])),) + x.shape[k:])
    return _scatter("ScatterND", ctx, out, rows, upd.reshape((len(rows),) + x.shape[k:])).reshape(x.shape)


# ---------------------------------------------------------------- value-dependent ops
@_kernel("TopK")
def topk(ctx: OpContext, x: np.ndarray, k_in: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Sorted output; ties keep the lower index first, NaN counts as the largest value."""
    _num("TopK", x)
    k = ctx.attr("k") if ctx.opset < 10 else _ints(k_in)[0]
    axis = _axis("TopK", ctx.attr("axis", -1), x.ndim)
    n = x.shape[axis]
    _need(0 <= k <= n, f"TopK: k={k} for axis of size {n}")
    if ctx.attr("largest", 1):  # descending with stable ties: sort the reversed axis, reverse back
        order = n - 1 - np.flip(np.argsort(np.flip(x, axis), axis=axis, kind="stable"), axis)
    else:
        order = np.argsort(x, axis=axis, kind="stable")
    order = np.take(order, np.arange(k), axis=axis).astype(np.int64, copy=False)
    return np.take_along_axis(x, order, axis=axis), order


@_kernel("NonZero", since=9)
def nonzero(ctx: OpContext, x: np.ndarray) -> np.ndarray:
    _num("NonZero", x)
    if x.ndim == 0:  # the reference's shape for a scalar
        return np.zeros((0, int(x != 0)), dtype=np.int64)
    return np.array(np.nonzero(x), dtype=np.int64).reshape(x.ndim, -1)


@_kernel("CumSum", since=11)
def cumsum(ctx: OpContext, x: np.ndarray, axis_in: np.ndarray) -> np.ndarray:
    _need(x.dtype.kind in "iuf" and np.asarray(axis_in).size == 1, "CumSum: dtype or non-scalar axis")
    axis = _axis("CumSum", _ints(axis_in)[0], x.ndim)
    rev = ctx.attr("reverse", 0)
    y = np.flip(x, axis) if rev else x
    if ctx.attr("exclusive", 0):  # shifted by one: out[i] = sum(y[:i])
        lead = (slice(None),) * axis
        out = np.zeros_like(y)
        np.cumsum(y[lead + (slice(None, -1),)], axis=axis, dtype=x.dtype, out=out[lead + (slice(1, None),)])
    else:
        out = np.cumsum(y, axis=axis, dtype=x.dtype)
    return np.flip(out, axis) if rev else out


@_kernel("Range", since=11)
def range_(ctx: OpContext, start: np.ndarray, limit: np.ndarray, delta: np.ndarray) -> np.ndarray:
    """float16 runs in float32 (stash_type=1, opset 27); float in float64 as the reference does."""
    dt = start.dtype
    if dt.kind in "iuf" and delta.size == 1 and delta.item() == 0:
        raise ValueError("input 'delta' is 0; Range needs a nonzero step")
    _need(dt.kind in "iuf", f"Range: dtype {dt}")
    if dt == np.float16:
        _need(ctx.attr("stash_type", 1) == 1, "Range: stash_type other than FLOAT")
        f32 = np.arange(start.astype(np.float32).item(), float(limit.item()), float(delta.item()), dtype=np.float32)
        return f32.astype(dt)
    if dt.kind == "f":
        return np.arange(start.item(), limit.item(), delta.item()).astype(dt)
    return np.arange(start.item(), limit.item(), delta.item(), dtype=dt)


@_kernel("Trilu", since=14)
def trilu(ctx: OpContext, x: np.ndarray, k: np.ndarray | None = None) -> np.ndarray:
    _need(x.ndim >= 2, "Trilu: rank < 2")
    kk = 0 if k is None else _ints(k)[0]
    return np.triu(x, kk) if ctx.attr("upper", 1) else np.tril(x, kk)


@_kernel("OneHot", since=11)
def one_hot(ctx: OpContext, idx: np.ndarray, depth: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Indices outside [-depth, depth) give an all-off row; float indices must be integral."""
    _num("OneHot", idx, values)
    d = float(np.asarray(depth).reshape(-1)[0])
    ok_idx = idx.dtype.kind != "f" or (np.isfinite(idx) & (idx == np.trunc(idx))).all()
    _need(ok_idx and np.isfinite(d) and d == int(d) >= 0 and values.size == 2, "OneHot: bad depth/indices/values")
    axis, depth_i = _axis("OneHot", ctx.attr("axis", -1), idx.ndim + 1), int(d)
    ind = idx.astype(np.int64)
    ind = np.expand_dims(np.where(ind < 0, ind + depth_i, ind), axis)
    hot = np.arange(depth_i).reshape((depth_i,) + (1,) * (idx.ndim - axis)) == ind
    off, on = values.reshape(-1)
    return np.where(hot, on, off)


@_kernel("Einsum", since=12)
def einsum(ctx: OpContext, *xs: np.ndarray) -> np.ndarray:
    _need(all(x.dtype.kind in "iuf" and x.dtype == xs[0].dtype for x in xs), "Einsum: dtype")
    out = np.einsum(ctx.attr("equation").replace(" ", ""), *xs, optimize=True)
    return np.asarray(out).astype(xs[0].dtype, copy=False)


@_kernel("DepthToSpace")
def depth_to_space(ctx: OpContext, x: np.ndarray) -> np.ndarray:
    bs, mode = ctx.attr("blocksize"), ctx.attr("mode", "DCR")
    _need(x.ndim == 4 and x.shape[1] % (bs * bs) == 0 and mode in ("DCR", "CRD"), "DepthToSpace: shape/mode")
    b, c, h, w = x.shape
    if mode == "DCR":
        t = x.reshape(b, bs, bs, c // (bs * bs), h, w).transpose(0, 3, 4, 1, 5, 2)
    else:
        t = x.reshape(b, c // (bs * bs), bs, bs, h, w).transpose(0, 1, 4, 2, 5, 3)
    return t.reshape(b, c // (bs * bs), h * bs, w * bs)


@_kernel("SpaceToDepth")
def space_to_depth(ctx: OpContext, x: np.ndarray) -> np.ndarray:
    """``mode`` exists from opset 28; before it the layout is DCR."""
    bs, mode = ctx.attr("blocksize"), ctx.attr("mode", "DCR")
    _need(x.ndim == 4 and x.shape[2] % bs == 0 == x.shape[3] % bs and mode in ("DCR", "CRD"), "SpaceToDepth")
    b, c, h, w = x.shape
    t = x.reshape(b, c, h // bs, bs, w // bs, bs)
    t = t.transpose(0, 3, 5, 1, 2, 4) if mode == "DCR" else t.transpose(0, 1, 3, 5, 2, 4)
    return t.reshape(b, c * bs * bs, h // bs, w // bs)
