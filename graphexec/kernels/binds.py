"""Binds (``registry.BindFn``) for the small kernels a decode step is made of: Slice, Split,
Expand, Transpose, Concat, Gather, ReduceMean, Pow, MatMul, Gemm (and, from ``binds_norm``,
Softmax, LayerNormalization, Sigmoid, Cast).

A decode step runs ~150 kernels on tensors of a few KB, where a kernel's Python (its
argument checks, its attributes, its index arithmetic) costs several times its numpy work.
A plan's replay (``engine/steps.py``) calls each kernel on the same device views every run,
so what depends only on those views' shapes and on constant inputs is worked out here once:

- a **view kernel** (Slice, Split, Expand, Transpose) returns a view of its input's memory,
  which does not move: the view itself is made once and handed back each run (the step's
  end copies it into the output, as it copies the kernel's result);
- Concat, Gather (its indices checked once where they are constant), ReduceMean, Pow,
  MatMul and Gemm (alpha = beta = 1) become the numpy calls the kernel would make, its
  checks done here. MatMul and Gemm are ``kernels/nn.py``'s: their binds call its helpers
  and follow its cases (``test_decode_steps`` holds each bind to its kernel, byte for byte).

A bind returns None wherever its case is not certain (an input computed at run time that the
kernel reads as a number, a dtype the kernel widens, a result that would not be an array);
the kernel's own call then runs, the plain path.
"""

from __future__ import annotations

import math
from functools import partial
from itertools import repeat
from typing import Any, Callable

import numpy as np

from graphexec.kernels import binds_norm, elementwise, nn, reduce, selection, tensor
from graphexec.kernels.registry import OpContext, Unsupported, definitions_of, fits, update

Bound = Callable[[], Any] | None


def _consts(ctx: OpContext, first: int = 1) -> bool:
    """Whether every given input from ``first`` on is a graph constant (the same every run)."""
    return all(ctx.const_inputs[first:])


def _root(a: np.ndarray) -> Any:
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a.base if a.base is not None else a


def _views_of(res: Any, x: np.ndarray) -> bool:
    """Whether ``res`` (an array or a tuple of them) is views of ``x``'s memory, never a copy."""
    arrays = res if isinstance(res, tuple) else (res,)
    root = _root(x)
    return all(type(a) is np.ndarray and a.base is not None and _root(a) is root for a in arrays)


def _view_bind(kernel: Callable[..., Any]) -> Callable[..., Bound]:
    """The bind of a kernel that returns views of its first input, reading none of its values:
    the views, made once (``kernel`` on the bound arrays) and returned as they are each run."""

    def bind(ctx: OpContext, x: Any, *args: Any) -> Bound:
        if type(x) is not np.ndarray or not _consts(ctx):
            return None
        try:
            res = kernel(ctx, x, *args)
        except (Unsupported, ValueError, TypeError, IndexError):
            return None
        return repeat(res).__next__ if _views_of(res, x) else None

    return bind


def bind_concat(ctx: OpContext, *xs: Any, out: np.ndarray | None = None) -> Bound:
    """``np.concatenate`` on the bound arrays, into ``out`` where the kernel would write there."""
    arrays = tuple(x for x in xs if x is not None)
    if not arrays or any(type(x) is not np.ndarray for x in arrays):
        return None
    first = arrays[0]
    if not first.ndim or any(x.dtype != first.dtype or x.ndim != first.ndim for x in arrays):
        return None
    axis = ctx.attrs.get("axis")
    if not isinstance(axis, int) or not -first.ndim <= axis < first.ndim:
        return None
    axis %= first.ndim
    rest = [x.shape[:axis] + x.shape[axis + 1:] for x in arrays]
    if any(r != rest[0] for r in rest):
        return None   # numpy's error, as the kernel raises it
    shape = first.shape[:axis] + (sum(x.shape[axis] for x in arrays),) + first.shape[axis + 1:]
    if out is not None and out.dtype == first.dtype and out.shape == shape:
        return partial(np.concatenate, arrays, axis=axis, out=out)
    return partial(np.concatenate, arrays, axis=axis)


def bind_gather(ctx: OpContext, x: Any, idx: Any) -> Bound:
    """``np.take`` with constant indices checked and wrapped once; indices computed at run
    time (a decode step's token ids into the embedding) through ``_take``."""
    if type(x) is not np.ndarray or type(idx) is not np.ndarray:
        return None
    runtime = not _consts(ctx)
    if runtime and idx.dtype.type not in (np.int32, np.int64):
        return None
    if x.ndim - 1 + idx.ndim == 0:   # np.take's result is a numpy scalar: the kernel's asarray
        return None
    try:
        axis = tensor._axis("Gather", ctx.attr("axis", 0), x.ndim)
        if runtime:   # its values are not read here: they are the run's
            return partial(_take, x, idx, axis)
        ind = tensor._indices("Gather", idx, x.shape[axis])
    except Unsupported:
        return None
    return partial(np.take, x, ind, axis=axis)


def _take(x: np.ndarray, idx: np.ndarray, axis: int) -> np.ndarray:
    """``gather`` on indices read as they are now: ``np.take`` wraps an index in [-dim, 0)
    as the kernel does, and refuses one out of range, which is the kernel's Unsupported
    (its runner then turns to the fallback, as for the kernel's own refusal)."""
    try:
        return np.take(x, idx, axis=axis)
    except IndexError:
        raise Unsupported("Gather: index out of range") from None


def bind_reduce_mean(ctx: OpContext, x: Any, axes_in: Any = None, out: np.ndarray | None = None) -> Bound:
    """A float ReduceMean over constant axes: the kernel's sum and division, with no checks;
    a mean of all of ``x`` (a decode step's one row, an RMSNorm's) written into ``out``."""
    if type(x) is not np.ndarray or x.dtype.kind != "f" or x.dtype == np.float16 or not _consts(ctx):
        return None
    try:
        axes = reduce._axes("ReduceMean", ctx, x, axes_in)
    except Unsupported:
        return None
    keep = bool(ctx.attr("keepdims", 1))
    count = x.size if axes is None else math.prod(x.shape[a] for a in axes)
    want = reduce.reduce_mean(x, axes, keep)
    if type(want) is not np.ndarray:   # a 0-d result: the kernel's asarray
        return None
    if count == x.size and x.size and fits(out, want.shape, want.dtype) and x.flags.c_contiguous:
        return partial(_mean_all, x.reshape(-1), float(count), x.dtype.type, out.reshape(-1), out=out)
    return partial(_mean, x, axes, keep, count)


bind_reduce_mean.takes_out = True   # type: ignore[attr-defined]  # though the kernel takes none


def _mean(x: np.ndarray, axes: Any, keep: bool, count: int) -> np.ndarray:
    """``reduce_mean`` of a float: the same sum (``np.sum`` is ``np.add.reduce``) and division."""
    total: Any = np.add.reduce(x, axis=axes, dtype=x.dtype, keepdims=keep)   # type: ignore[call-overload]
    return total / count


def _mean_all(x: np.ndarray, count: float, f: Any, flat: np.ndarray, out: np.ndarray) -> np.ndarray:
    """``_mean`` of every element of ``x`` (flat): the same sum, and its division in float64
    rounded to the dtype, the correctly rounded quotient as numpy's own division gives it."""
    flat[0] = f(float(np.add.reduce(x)) / count)
    return out


_mean_all.writes_out = True   # type: ignore[attr-defined]


def bind_pow(ctx: OpContext, a: Any, b: Any, out: np.ndarray | None = None) -> Bound:
    """A float base whose power keeps its dtype: ``np.power`` alone (no cast left to do), into
    ``out`` where the result fits it."""
    if type(a) is not np.ndarray or type(b) is not np.ndarray or a.dtype.kind != "f" or b.dtype.kind not in "iuf":
        return None
    if not elementwise._accepts("Pow", "iuf", a) or not elementwise._accepts("Pow", "iuf", b):
        return None
    res = np.power(a, b)
    if type(res) is not np.ndarray or res.dtype != a.dtype:   # a numpy scalar, or a wider dtype: the kernel casts
        return None
    return partial(np.power, a, b, out=out) if fits(out, res.shape, res.dtype) else partial(np.power, a, b)


bind_pow.takes_out = True   # type: ignore[attr-defined]  # though the kernel takes none


_SAME = (np.float32, np.float64, np.int32, np.int64, np.uint32, np.uint64)   # MatMul computes these as they are


def bind_matmul(ctx: OpContext, a: Any, b: Any, out: np.ndarray | None = None) -> Bound:
    """A product of matrices (or stacks) in their own dtype: ``np.matmul`` into ``out`` where
    the kernel would write there, else a new array (its ``astype`` then copies nothing)."""
    if type(a) is not np.ndarray or type(b) is not np.ndarray or a.dtype != b.dtype or a.dtype.type not in _SAME:
        return None
    shape = nn._matmul_shape(a, b)
    if shape is None:   # a 1-d operand (a 0-d result), or numpy's own error
        return None
    into = out if fits(out, shape, a.dtype) else None
    if into is not None and b.ndim == 2 and math.prod(a.shape[:-2]) == 1:   # one matrix product, into out
        dot = _dot_into(a.reshape(a.shape[-2:]), b, into)
        if dot is not None:
            return dot
    return partial(np.matmul, a, b, out=into)


def _dot_into(a: np.ndarray, b: np.ndarray, out: np.ndarray, c: np.ndarray | None = None) -> Bound:
    """``np.matmul(a, b, out=out)`` of two float matrices (``out`` of any shape with the
    product's elements) as ``np.dot``, then ``out += c`` if given. numpy makes the same BLAS
    call for both (gemm, or gemv for a row or a column: ``test_decode_steps`` holds them
    equal byte for byte, transposed operands included); dot skips the gufunc's dispatch,
    about 1 us of a 2 us product. None where dot would refuse ``out`` (not contiguous)."""
    if a.dtype.type not in (np.float32, np.float64) or not out.flags.c_contiguous:
        return None
    flat = out.reshape(a.shape[0], b.shape[1])
    return partial(_dot, a, b, flat, c, out=out)


def _dot(a: np.ndarray, b: np.ndarray, flat: np.ndarray, c: np.ndarray | None, out: np.ndarray) -> np.ndarray:
    np.dot(a, b, flat)
    if c is not None:
        flat += c
    return out


_dot.writes_out = True   # type: ignore[attr-defined]  # a chain's member may write into a scratch array


def bind_gemm(ctx: OpContext, a: Any, b: Any, c: Any = None, out: np.ndarray | None = None) -> Bound:
    """Gemm with alpha = beta = 1 on two float matrices and a C that broadcasts to the
    product: the kernel's matmul (into ``out`` where it would) and its in-place add of C."""
    if type(a) is not np.ndarray or type(b) is not np.ndarray or a.ndim != 2 or b.ndim != 2 \
            or a.dtype != b.dtype or a.dtype.type not in (np.float32, np.float64):
        return None
    alpha, beta, trans_a, trans_b = nn._gemm_attrs(ctx)
    if alpha != 1.0 or beta != 1.0 or (c is not None and (type(c) is not np.ndarray or c.dtype != a.dtype)):
        return None
    wa, wb = a.T if trans_a else a, b.T if trans_b else b
    if wa.shape[1] != wb.shape[0]:
        return None
    shape = (wa.shape[0], wb.shape[1])
    if c is not None and (ctx.opset < 7 and c.shape != shape or not nn._fits_into(c.shape, shape)):
        return None
    into = out if fits(out, shape, a.dtype) else None
    dot = None if into is None else _dot_into(wa, wb, into, c)
    if dot is not None:
        return dot
    return partial(np.matmul, wa, wb, out=into) if c is None else partial(_gemm, wa, wb, c, into)


def _gemm(a: np.ndarray, b: np.ndarray, c: np.ndarray, out: np.ndarray | None) -> np.ndarray:
    """``gemm``'s alpha = beta = 1 case: the product, C added in place."""
    y = np.matmul(a, b, out=out)
    y += c
    return y


def install() -> None:
    """Give the kernels their binds (at import: every registration is made by then), each of
    the op's registrations whose function is the one the bind was written for."""
    binds: dict[str, tuple[Callable[..., Any], Callable[..., Bound]]] = {
        "Slice": (tensor.slice_, _view_bind(tensor.slice_)),
        "Split": (tensor.split, _view_bind(tensor.split)),
        "Expand": (tensor.expand, _view_bind(tensor.expand)),
        "Transpose": (tensor._SIMPLE["Transpose"], _view_bind(tensor._SIMPLE["Transpose"])),
        "Concat": (tensor.concat, bind_concat),
        "Gather": (tensor.gather, bind_gather),
        "ReduceMean": (reduce.reduce_mean, bind_reduce_mean),
        "Pow": (elementwise.pow_, bind_pow),
        "MatMul": (nn.matmul, bind_matmul),
        "Gemm": (nn.gemm, bind_gemm),
        "Softmax": (nn.softmax, binds_norm.bind_softmax),
        "LayerNormalization": (nn.layer_norm, binds_norm.bind_layer_norm),
        "Sigmoid": (elementwise.ACTIVATION_KERNELS["Sigmoid"], binds_norm.bind_sigmoid),
        "Cast": (selection.cast, binds_norm.bind_cast),
    }
    for op, (fn, bind) in binds.items():
        for d in definitions_of(op):
            if not d.domain and getattr(d.fn, "__wrapped__", d.fn) is fn:
                update(op, opset=d.since, bind=bind)


install()
