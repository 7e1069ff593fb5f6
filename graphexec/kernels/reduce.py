"""Reduction kernels: Reduce* and ArgMax/ArgMin.

Axes come from an attribute before the opset where they became an input (ReduceSum:
13, the others: 18). Sums over float16 accumulate in float32; results keep the input
dtype, and empty reductions give the reference's identities (0, 1, -inf, ±inf/iinfo).
"""

from __future__ import annotations

from functools import wraps
from typing import Any, Callable

import numpy as np

from graphexec.kernels.registry import OpContext, Unsupported, register

_F16 = np.dtype(np.float16)
_AXES_INPUT_SINCE = {"ReduceSum": 13}  # every other Reduce* takes axes as an input from 18

Axes = tuple[int, ...] | None


def _axes(op: str, ctx: OpContext, x: np.ndarray, axes_in: np.ndarray | None) -> Axes:
    """Normalized axes: a tuple, None for "all".

    noop_with_empty_axes gives ``()``, numpy's empty reduction: composite reductions
    still apply their elementwise steps (ReduceSumSquare squares), as the spec says.
    """
    if ctx.opset >= _AXES_INPUT_SINCE.get(op, 18):
        axes = None if axes_in is None else [int(a) for a in np.asarray(axes_in).reshape(-1)]
        noop = ctx.attr("noop_with_empty_axes", 0)
    else:
        axes, noop = ctx.attr("axes", None), 0
    if not axes:
        return () if noop else None
    norm = tuple(a + x.ndim if a < 0 else a for a in axes)
    if len(set(norm)) != len(norm) or any(not 0 <= a < x.ndim for a in norm):
        raise Unsupported(f"{op}: bad axes {axes} for rank {x.ndim}")
    return norm


def _reduce_kernel(op: str, kinds: str) -> Callable[[Callable[..., np.ndarray]], Callable[..., np.ndarray]]:
    """Register a reduction ``fn(x, axes, keepdims)`` with shared axes handling."""

    def wrap(fn: Callable[..., np.ndarray]) -> Callable[..., np.ndarray]:
        @wraps(fn)
        def kernel(ctx: OpContext, x: np.ndarray, axes_in: np.ndarray | None = None) -> np.ndarray:
            if x.dtype.kind not in kinds:
                raise Unsupported(f"{op}: dtype {x.dtype}")
            axes = _axes(op, ctx, x, axes_in)
            keep = bool(ctx.attr("keepdims", 1))
            with np.errstate(all="ignore"):
                out = np.asarray(fn(x, axes, keep))
            return out.astype(x.dtype, copy=False)

        register(op)(kernel)
        return fn

    return wrap


def _acc(x: np.ndarray) -> np.dtype:
    """Accumulation dtype: float32 for float16, else the input dtype."""
    return np.dtype(np.float32) if x.dtype == _F16 else x.dtype


@_reduce_kernel("ReduceSum", "iuf")
def reduce_sum(x: np.ndarray, axes: Axes, keep: bool) -> np.ndarray:
    return np.sum(x, axis=axes, keepdims=keep, dtype=_acc(x))


@_reduce_kernel("ReduceMean", "iuf")
def reduce_mean(x: np.ndarray, axes: Axes, keep: bool) -> np.ndarray:
    """Integer means truncate toward zero like an integer division."""
    count = x.size if axes is None else int(np.prod([x.shape[a] for a in axes]))
    if x.dtype.kind == "f":
        return np.sum(x, axis=axes, keepdims=keep, dtype=_acc(x)) / count
    if count == 0:
        raise Unsupported("ReduceMean: integer mean of an empty set")
    s = np.sum(x, axis=axes, keepdims=keep, dtype=x.dtype)
    q = np.floor_divide(s, count)
    if x.dtype.kind == "i":
        q = q + ((np.remainder(s, count) != 0) & (s < 0)).astype(q.dtype)
    return q


def _out_shape(x: np.ndarray, axes: Axes, keep: bool) -> tuple[int, ...]:
    red = range(x.ndim) if axes is None else axes
    if keep:
        return tuple(1 if i in red else d for i, d in enumerate(x.shape))
    return tuple(d for i, d in enumerate(x.shape) if i not in red)


def _extreme(x: np.ndarray, largest: bool) -> Any:
    """Identity of max/min for empty reductions (reference: -inf/iinfo.min/False and mirrors)."""
    if x.dtype.kind == "b":
        return not largest
    if x.dtype.kind in "iu":
        info = np.iinfo(x.dtype)
        return info.min if largest else info.max
    return -np.inf if largest else np.inf


@_reduce_kernel("ReduceMax", "biuf")
def reduce_max(x: np.ndarray, axes: Axes, keep: bool) -> np.ndarray:
    return np.max(x, axis=axes, keepdims=keep, initial=_extreme(x, True))


@_reduce_kernel("ReduceMin", "biuf")
def reduce_min(x: np.ndarray, axes: Axes, keep: bool) -> np.ndarray:
    return np.min(x, axis=axes, keepdims=keep, initial=_extreme(x, False))


@_reduce_kernel("ReduceProd", "iuf")
def reduce_prod(x: np.ndarray, axes: Axes, keep: bool) -> np.ndarray:
    return np.prod(x, axis=axes, keepdims=keep, dtype=_acc(x))


@_reduce_kernel("ReduceL1", "iuf")
def reduce_l1(x: np.ndarray, axes: Axes, keep: bool) -> np.ndarray:
    return np.sum(np.abs(x), axis=axes, keepdims=keep, dtype=_acc(x))


@_reduce_kernel("ReduceL2", "iuf")
def reduce_l2(x: np.ndarray, axes: Axes, keep: bool) -> np.ndarray:
    """Integer L2 truncates the square root, as the reference's cast does."""
    xa = x.astype(_acc(x), copy=False)
    return np.sqrt(np.sum(xa * xa, axis=axes, keepdims=keep, dtype=xa.dtype))


@_reduce_kernel("ReduceSumSquare", "iuf")
def reduce_sum_square(x: np.ndarray, axes: Axes, keep: bool) -> np.ndarray:
    xa = x.astype(_acc(x), copy=False)
    return np.sum(xa * xa, axis=axes, keepdims=keep, dtype=xa.dtype)


@_reduce_kernel("ReduceLogSum", "f")
def reduce_log_sum(x: np.ndarray, axes: Axes, keep: bool) -> np.ndarray:
    return np.log(np.sum(x, axis=axes, keepdims=keep, dtype=_acc(x)))


@_reduce_kernel("ReduceLogSumExp", "f")
def reduce_log_sum_exp(x: np.ndarray, axes: Axes, keep: bool) -> np.ndarray:
    """Shift by the (finite) max for stability; an empty set gives -inf."""
    xa = x.astype(_acc(x), copy=False)
    if x.size == 0:
        return np.full(_out_shape(x, axes, keep), -np.inf, dtype=xa.dtype)
    mx = np.max(xa, axis=axes, keepdims=True)
    mx = np.where(np.isfinite(mx), mx, 0).astype(xa.dtype)
    out = np.log(np.sum(np.exp(xa - mx), axis=axes, keepdims=True)) + mx
    return out if keep else out.reshape(_out_shape(x, axes, False))


def _arg(op: str, largest: bool) -> None:
    @register(op)
    def kernel(ctx: OpContext, x: np.ndarray) -> np.ndarray:
        """Ties resolve to the first index, or the last with select_last_index=1."""
        if x.dtype.kind not in "biuf":
            raise Unsupported(f"{op}: dtype {x.dtype}")
        axis = ctx.attr("axis", 0)
        axis = axis + x.ndim if axis < 0 else axis
        if not 0 <= axis < x.ndim or x.shape[axis] == 0:
            raise Unsupported(f"{op}: axis {axis} for shape {x.shape}")
        f = np.argmax if largest else np.argmin
        if ctx.attr("select_last_index", 0):
            idx = x.shape[axis] - 1 - f(np.flip(x, axis), axis=axis, keepdims=True)
        else:
            idx = f(x, axis=axis, keepdims=True)
        idx = idx.astype(np.int64, copy=False)
        return idx if ctx.attr("keepdims", 1) else np.squeeze(idx, axis=axis)


_arg("ArgMax", True)
_arg("ArgMin", False)
