"""Binds (``registry.BindFn``) for Softmax, LayerNormalization, Sigmoid and Cast: the kernels'
own numpy operations in the same order (so the same bits), with their checks done once
and their temporaries (row maxima and sums, the squared deviations, the statistics)
made once at bind time instead of every call.

A bound call whose function has ``writes_out`` set writes its result into its ``out=``
keyword and returns it (as a one-output ufunc does): a fused chain
(``FusedRunner.chained``) then runs it into a member's scratch array. A bind returns
None where its case is not certain; the kernel's own call, the plain path, then runs.
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any, Callable

import numpy as np

from graphexec.kernels import nn, selection
from graphexec.kernels.registry import OpContext, Unsupported, fits

Bound = Callable[[], Any] | None
_FLOAT = (np.float32, np.float64)


def _float(*xs: Any) -> bool:
    """Whether every operand is a float32 or float64 array of one dtype (no widening to do)."""
    return all(type(x) is np.ndarray and x.dtype.type in _FLOAT and x.dtype == xs[0].dtype for x in xs)


def bind_softmax(ctx: OpContext, x: Any, out: np.ndarray | None = None) -> Bound:
    """``nn.softmax``: the row max and the row sum go into arrays made here."""
    if not _float(x):
        return None
    try:
        v, axis = nn._softmax_frame(ctx, x)
    except Unsupported:
        return None
    if v is not x and (v.base is None or not np.shares_memory(v, x)):
        return None   # a reshape that copied: its values would be the bind's, not the run's
    into = out if v is x and fits(out, x.shape, x.dtype) else None
    n = v.shape[axis]
    keep = v.shape[:axis] + (1,) + v.shape[axis + 1:]
    m, s = np.empty(keep, v.dtype), np.empty(keep, v.dtype)
    if axis == v.ndim - 1 and 1 < n <= 64 and v.size >= 64 * n:   # ``_row_max``'s transposed copy
        t = np.empty((n, v.size // n), v.dtype)
        rows = v.reshape(-1, n).T
        if rows.base is None or not np.shares_memory(rows, x):
            return None
        return partial(_softmax_t, v, axis, m, s, t, rows, x.shape, out=into)
    if v is x and axis == v.ndim - 1 and x.flags.c_contiguous and (into is None or into.flags.c_contiguous):
        # the rows as a matrix (views): reductions and divisions on two axes, not four
        return partial(_softmax_rows, x.reshape(-1, n), m.reshape(-1), s.reshape(-1), m.reshape(-1, 1),
                       s.reshape(-1, 1), None if into is None else into.reshape(-1, n), x.shape, out=into)
    return partial(_softmax, v, axis, m, s, x.shape, out=into)


def _softmax_rows(v: np.ndarray, m: np.ndarray, s: np.ndarray, m_col: np.ndarray, s_col: np.ndarray,
                  e: np.ndarray | None, shape: tuple[int, ...], out: np.ndarray | None) -> np.ndarray:
    """``_softmax`` over the last axis of a contiguous ``x`` as a matrix of rows: the same
    operations (the same pairwise row sums), each numpy call on two axes instead of the
    keepdims shape's four (a decode step's (1, heads, 1, past) scores): ~15% less."""
    np.maximum.reduce(v, axis=1, out=m)
    e = np.subtract(v, m_col, out=e)
    np.exp(e, out=e)
    np.add.reduce(e, axis=1, out=s)
    e /= s_col
    return e.reshape(shape) if out is None else out


def _softmax(v: np.ndarray, axis: int, m: np.ndarray, s: np.ndarray, shape: tuple[int, ...],
             out: np.ndarray | None) -> np.ndarray:
    """``nn.softmax`` with its max and sum written into ``m`` and ``s``."""
    np.maximum.reduce(v, axis=axis, keepdims=True, out=m)
    return _exp_norm(v, axis, m, s, shape, out)


def _softmax_t(v: np.ndarray, axis: int, m: np.ndarray, s: np.ndarray, t: np.ndarray, rows: np.ndarray,
               shape: tuple[int, ...], out: np.ndarray | None) -> np.ndarray:
    """``nn.softmax`` on short last-axis rows: the max over ``_row_max``'s transposed copy, in ``t``."""
    np.copyto(t, rows)
    np.maximum.reduce(t, axis=0, out=m.reshape(-1))
    return _exp_norm(v, axis, m, s, shape, out)


def _exp_norm(v: np.ndarray, axis: int, m: np.ndarray, s: np.ndarray, shape: tuple[int, ...],
              out: np.ndarray | None) -> np.ndarray:
    e = np.subtract(v, m, out=out)
    np.exp(e, out=e)
    np.add.reduce(e, axis=axis, keepdims=True, out=s)
    e /= s
    return e if e.shape == shape else e.reshape(shape)


_softmax.writes_out = _softmax_t.writes_out = _softmax_rows.writes_out = True   # type: ignore[attr-defined]


def bind_layer_norm(ctx: OpContext, x: Any, scale: Any, b: Any = None, out: np.ndarray | None = None) -> Bound:
    """``nn.layer_norm``'s one-dtype case (``_layer_norm_into``): its mean, variance and squared
    deviations go into arrays made here. One output only (Mean and InvStdDev are not served)."""
    if not _float(x, scale, *(() if b is None else (b,))) or not x.size or ctx.num_outputs > 1 \
            or int(ctx.attr("stash_type", 1)) != 1:
        return None
    axis = int(ctx.attr("axis", -1))
    if not -x.ndim <= axis < x.ndim:
        return None
    red = tuple(range(axis % x.ndim, x.ndim))
    eps = x.dtype.type(ctx.attr("epsilon", 1e-5))
    count = np.intp(math.prod(x.shape[i] for i in red))
    into = out if fits(out, x.shape, x.dtype) and not np.may_share_memory(out, x) else None
    if count == x.size and eps > 0 and count < 1 << 24:   # one row (a decode step's): its statistics as scalars
        row = _one_row(x, scale, b, into)
        if row is not None:
            flat, y, w, bias = row
            shaped = y.reshape(x.shape) if into is None else into
            f = x.dtype.type
            return partial(_layer_norm_row, flat, y, w, bias, f(count), eps, np.empty(x.size, x.dtype),
                           np.empty((), x.dtype), f, shaped, out=into)
    keep = tuple(1 if i in red else d for i, d in enumerate(x.shape))
    mean, var, sq = np.empty(keep, x.dtype), np.empty(keep, x.dtype), np.empty(x.shape, x.dtype)
    return partial(_layer_norm, x, scale, b, red, eps, count, mean, var, sq, out=into)


def _layer_norm(x: np.ndarray, scale: np.ndarray, b: np.ndarray | None, red: tuple[int, ...], eps: Any,
                count: Any, mean: np.ndarray, var: np.ndarray, sq: np.ndarray, out: np.ndarray | None) -> np.ndarray:
    """``nn._layer_norm_into``'s operations, in its order, into the arrays given."""
    np.add.reduce(x, axis=red, keepdims=True, out=mean)
    np.true_divide(mean, count, out=mean, casting="unsafe")
    d = np.subtract(x, mean, out=out)
    np.multiply(d, d, out=sq)
    np.add.reduce(sq, axis=red, keepdims=True, out=var)
    np.true_divide(var, count, out=var, casting="unsafe")
    var += eps
    np.sqrt(var, out=var)
    np.divide(1, var, out=var)
    d *= var
    d *= scale
    if b is not None:
        d += b
    return d


_layer_norm.writes_out = True   # type: ignore[attr-defined]


def _one_row(x: np.ndarray, scale: np.ndarray, b: np.ndarray | None,
             into: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None] | None:
    """(x, y, scale, b) as flat views of the one row (y: ``into``'s, else an array made here),
    or None where one is not a view or scale and bias would broadcast (then not element for element)."""
    for w in (scale, b):
        if w is not None and (w.size != x.size or np.broadcast_shapes(w.shape, x.shape) != x.shape):
            return None
    flat, y, w = _flat(x), np.empty(x.size, x.dtype) if into is None else _flat(into), _flat(scale)
    bias = None if b is None else _flat(b)
    if flat is None or y is None or w is None or (b is not None and bias is None):
        return None
    return flat, y, w, bias


def _flat(a: np.ndarray) -> np.ndarray | None:
    """A one-dimensional view of ``a``'s elements in order; None where that would be a copy."""
    return a.reshape(-1) if a.flags.c_contiguous else None


def _layer_norm_row(x: np.ndarray, y: np.ndarray, scale: np.ndarray, b: np.ndarray | None, count: Any,
                    eps: Any, sq: np.ndarray, inv: np.ndarray, f: Any, shaped: np.ndarray,
                    out: np.ndarray | None) -> np.ndarray:
    """``_layer_norm`` on one contiguous row, bit for bit: the same pairwise sums (``add.reduce``
    of the row), then the statistics as scalars of the dtype (``count`` and ``eps`` are). The
    kernel divides by the count in float64 and rounds; the dtype's own division of the same
    operands is that correctly rounded quotient (a float64 result of +, /, sqrt rounded to
    float32 is the correctly rounded float32 one, and the count below 2**24 is exact); sqrt
    is float64's, rounded. Seven numpy calls and no broadcasting, where the kernel makes
    eleven on the keepdims shapes. ``y`` is a flat view of ``out`` where given (``shaped`` is then ``out``)."""
    inv[()] = np.add.reduce(x) / count
    np.subtract(x, inv, y)
    np.multiply(y, y, sq)
    inv[()] = 1 / f(math.sqrt(np.add.reduce(sq) / count + eps))
    np.multiply(y, inv, y)
    np.multiply(y, scale, y)
    if b is not None:
        np.add(y, b, y)
    return shaped


_layer_norm_row.writes_out = True   # type: ignore[attr-defined]


def bind_sigmoid(ctx: OpContext, x: Any, out: np.ndarray | None = None) -> Bound:
    """Sigmoid's ``1 / (1 + exp(-x))`` as four ufuncs, the first three in place in an array made
    here, the last into ``out`` where it fits (float32/64: the kernel's ``_up`` and cast are no-ops)."""
    if not _float(x) or x.ndim == 0:
        return None
    into = out if fits(out, x.shape, x.dtype) else None
    return partial(_sigmoid, x, np.empty(x.shape, x.dtype), out=into)


def _sigmoid(x: np.ndarray, t: np.ndarray, out: np.ndarray | None) -> np.ndarray:
    np.negative(x, out=t)
    np.exp(t, out=t)
    np.add(1, t, out=t)
    return np.true_divide(1, t, out=out)


_sigmoid.writes_out = True   # type: ignore[attr-defined]
bind_sigmoid.takes_out = True   # type: ignore[attr-defined]  # though the kernel takes none


def bind_cast(ctx: OpContext, x: Any, out: np.ndarray | None = None) -> Bound:
    """``selection.cast`` on a fixed array: its ``astype``, or the same cast (numpy's unsafe
    casting, the same loop) into ``out`` where that fits (a chain's scratch: Llama's Cast+Mul)."""
    if type(x) is not np.ndarray:
        return None
    try:
        with np.errstate(all="ignore"):   # the kernel's, as registered: a NaN cast to an int warns
            want = selection.cast(ctx, x)
    except Unsupported:
        return None
    if type(want) is not np.ndarray:
        return None
    into = out if fits(out, x.shape, want.dtype) and not np.may_share_memory(out, x) else None
    return partial(_cast, x, want.dtype, out=into)


def _cast(x: np.ndarray, dtype: np.dtype, out: np.ndarray | None) -> np.ndarray:
    if out is None:
        return x.astype(dtype, copy=False)
    np.copyto(out, x, casting="unsafe")
    return out


_cast.writes_out = True   # type: ignore[attr-defined]
bind_cast.takes_out = True   # type: ignore[attr-defined]  # though the kernel takes none
