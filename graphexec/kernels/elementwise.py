"""Elementwise kernels: arithmetic, activations, comparisons, logic (variadic ops,
Where and Cast are in ``selection.py``).

Most ops are registered from tables of numpy ufuncs. Every kernel keeps the exact
ONNX output dtype (numpy would promote through python scalars or mixed dtypes) and
raises ``Unsupported`` for dtypes numpy does not model faithfully (strings,
bfloat16/float8/int4 from ml_dtypes, whose numpy kind is ``V``).
"""

from __future__ import annotations

from functools import partial, wraps
from typing import Any, Callable

import numpy as np

from graphexec.kernels import channels, scratch
from graphexec.kernels.quiet import is_quiet
from graphexec.kernels.registry import OpContext, Unsupported, register

_F16 = np.dtype(np.float16)
_FLOATS = (_F16, np.dtype(np.float32), np.dtype(np.float64))
_FLT_MAX = 3.4028234663852886e38


# ops that cannot raise a floating-point warning: no need to silence numpy around them
_QUIET = {"Relu", "Neg", "Abs", "Sign", "Max", "Min", "Not", "And", "Or", "Xor", "Equal", "Where"}


def _kernel(op: str, since: int = 1, until: int = 10_000,
            out: bool = False) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register ``fn`` with numpy warnings silenced and 0-d results kept as ndarrays;
    ``out``: ``fn`` takes the output's device bytes as ``out=`` (see the registry)."""

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        quiet = op in _QUIET

        @wraps(fn)
        def kernel(ctx: OpContext, *xs: Any, **kw: Any) -> Any:
            if quiet or is_quiet():
                res = fn(ctx, *xs, **kw)
            else:
                with np.errstate(all="ignore"):
                    res = fn(ctx, *xs, **kw)
            return res if type(res) is np.ndarray or isinstance(res, np.ndarray) else np.asarray(res)

        register(op, since=since, until=until, out=out)(kernel)
        return fn

    return wrap


def _check(op: str, kinds: str, *xs: np.ndarray) -> None:
    """Unsupported unless every input is a plain numpy dtype of ``kinds`` and they agree
    (dtypes found fine once are remembered: this runs before every elementwise kernel)."""
    first = xs[0].dtype
    for x in xs:
        d = x.dtype
        if (kinds, d) not in _CHECKED:
            if d.kind not in kinds or (kinds == "f" and d not in _FLOATS):
                raise Unsupported(f"{op}: dtype {d}")
            _CHECKED.add((kinds, d))
    for x in xs[1:]:
        if x.dtype != first:
            raise Unsupported(f"{op}: mixed dtypes {[x.dtype for x in xs]}")


_CHECKED: set[tuple[str, np.dtype]] = set()   # (kinds, dtype) pairs _check accepted


def _accepts(op: str, kinds: str, *xs: Any) -> bool:
    """Whether ``_check`` passes arrays ``xs`` (a bind asks once, where the kernel asks every call)."""
    if any(type(x) is not np.ndarray for x in xs):
        return False
    try:
        _check(op, kinds, *xs)
    except Unsupported:
        return False
    return True


def _into(out: np.ndarray | None, dtype: np.dtype, *xs: np.ndarray) -> np.ndarray | None:
    """``out`` when the result (``dtype``, the inputs' broadcast shape) fits it exactly, else None."""
    if out is None or out.dtype != dtype:
        return None
    shape: tuple[int, ...] | None = xs[0].shape
    for x in xs[1:]:
        if x.shape != shape:
            shape = _broadcast(tuple([x.shape for x in xs]))
            break
    return out if out.shape == shape else None


def _unbroadcast(x: np.ndarray, out: np.ndarray) -> np.ndarray:
    """``x`` as a ufunc's operand into ``out`` (it broadcasts to), each element's the same: a 0-d
    view of a one-element ``x``, a view in ``out``'s shape of one with its elements, else ``x``.
    numpy runs operands of one shape, or 0-d, without its broadcasting iterator (0.45 us, not 1.3)."""
    if x.shape == out.shape:
        return x
    if x.size == 1:
        return x.reshape(())
    if x.size == out.size:
        v = x.reshape(out.shape)
        if np.shares_memory(v, x):   # a view: the run's values, as they are then
            return v
    return x


_BROADCAST: dict[tuple[tuple[int, ...], ...], tuple[int, ...] | None] = {}


def _broadcast(shapes: tuple[tuple[int, ...], ...]) -> tuple[int, ...] | None:
    """np.broadcast_shapes of ``shapes`` (None if they do not broadcast), remembered: a
    graph's kernels meet the same few shapes every run, and numpy's function costs more
    than the arithmetic of a small tensor (2 us against 1.6 us for a (2, 32, 128) Add)."""
    if shapes in _BROADCAST:
        return _BROADCAST[shapes]
    if len(_BROADCAST) > 4096:   # bounded: shapes of one-off runs do not pile up
        _BROADCAST.clear()
    try:
        hit = np.broadcast_shapes(*shapes)
    except ValueError:
        hit = None
    _BROADCAST[shapes] = hit
    return hit


def _up(x: np.ndarray) -> np.ndarray:
    """float16 math goes through float32 so composite formulas round only once."""
    return x.astype(np.float32) if x.dtype == _F16 else x


# ---------------------------------------------------------------- unary tables
_UNARY_FLOAT: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "Sqrt": np.sqrt, "Exp": np.exp, "Log": np.log, "Reciprocal": np.reciprocal,
    "Floor": np.floor, "Ceil": np.ceil, "Round": np.rint, "Tanh": np.tanh,
    "Sin": np.sin, "Cos": np.cos, "Tan": np.tan, "Asin": np.arcsin, "Acos": np.arccos,
    "Atan": np.arctan, "Sinh": np.sinh, "Cosh": np.cosh, "Asinh": np.arcsinh,
    "Acosh": np.arccosh, "Atanh": np.arctanh,
}
RELU_BLOCK = 1 << 15   # elements per piece of a big Relu: its constant (128 KiB of float32) stays in L2
RELU_SMALL = 4096      # below this many elements, Relu is numpy's array-and-scalar maximum


def relu(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """max(x, 0); against a constant array on big tensors (numpy's two-array loop is several
    times faster than its array-and-scalar one). A big contiguous tensor goes a piece at a
    time against one small constant, which stays in cache, instead of a constant as big as
    the tensor, a third stream from memory: a Relu right after its conv (SqueezeNet's
    64x111x111) 290 -> 165 us. The same loop on every element, so the same values."""
    n = x.size
    if n < RELU_SMALL:
        return np.maximum(x, 0, out=out)
    if n < 2 * RELU_BLOCK or not x.flags.c_contiguous \
            or (out is not None and (not out.flags.c_contiguous or out.shape != x.shape)):
        return np.maximum(x, scratch.constant(0, x.shape, x.dtype), out=out)
    y = np.empty(x.shape, x.dtype) if out is None else out
    xf, yf = x.reshape(-1), y.reshape(-1)
    zero = scratch.constant(0, (RELU_BLOCK,), x.dtype)
    for i in range(0, n, RELU_BLOCK):
        j = min(n, i + RELU_BLOCK)
        np.maximum(xf[i:j], zero[:j - i], out=yf[i:j])
    return y


_UNARY_NUM: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "Neg": np.negative, "Abs": np.absolute, "Sign": np.sign, "Relu": relu,
}


def _unary(op: str, f: Callable[..., np.ndarray], kinds: str) -> None:
    """One-ufunc ops are registered without ``_kernel``'s generic wrapper: they run before
    most tasks, and each layer of calls costs about what a small tensor's arithmetic does."""
    quiet = op in _QUIET

    def kernel(ctx: OpContext, x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        if (kinds, x.dtype) not in _CHECKED:
            _check(op, kinds, x)
        into = out if out is not None and out.dtype == x.dtype and out.shape == x.shape else None
        if quiet or is_quiet():
            res = f(x, out=into)
        else:
            with np.errstate(all="ignore"):
                res = f(x, out=into)
        return res if type(res) is np.ndarray else np.asarray(res)

    def bind(ctx: OpContext, x: np.ndarray, out: np.ndarray | None = None) -> Callable[[], Any] | None:
        """``kernel`` on fixed arrays: the ufunc alone, its checks done here."""
        if not _accepts(op, kinds, x):
            return None
        into = _into(out, x.dtype, x)
        if into is None and x.ndim == 0:   # a 0-d result: the kernel's asarray
            return None
        if f is relu and x.size < RELU_SMALL:   # relu's small case: the ufunc itself
            return partial(np.maximum, x, 0, out=into)
        return partial(f, x, out=into)

    kernel.__name__ = kernel.__qualname__ = op.lower()
    register(op, out=True, bind=bind)(kernel)


for _op, _f in _UNARY_FLOAT.items():
    _unary(_op, _f, "f")
for _op, _f in _UNARY_NUM.items():
    _unary(_op, _f, "iuf")


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-x))


# Float activations: op -> (formula on a float32/64 array, attribute defaults).
_ACTIVATIONS: dict[str, tuple[Callable[..., np.ndarray], dict[str, float]]] = {
    "Sigmoid": (_sigmoid, {}),
    "LeakyRelu": (lambda x, alpha: np.where(x > 0, x, x * alpha), {"alpha": 0.01}),
    "Elu": (lambda x, alpha: np.where(x > 0, x, alpha * np.expm1(x)), {"alpha": 1.0}),
    "Selu": (lambda x, alpha, gamma: gamma * np.where(x > 0, x, alpha * np.expm1(x)),
             {"alpha": 1.67326319217681884765625, "gamma": 1.05070102214813232421875}),
    "Celu": (lambda x, alpha: np.maximum(x, 0) + np.minimum(0, alpha * np.expm1(x / alpha)), {"alpha": 1.0}),
    "HardSigmoid": (lambda x, alpha, beta: np.clip(x * alpha + beta, 0, 1), {"alpha": 0.2, "beta": 0.5}),
    "HardSwish": (lambda x: x * np.clip(x * (1 / 6) + 0.5, 0, 1), {}),
    "Softplus": (lambda x: np.logaddexp(0, x), {}),
    "Softsign": (lambda x: x / (1 + np.abs(x)), {}),
    "Mish": (lambda x: x * np.tanh(np.logaddexp(0, x)), {}),
    "ThresholdedRelu": (lambda x, alpha: np.where(x > alpha, x, 0), {"alpha": 1.0}),
}


ACTIVATION_KERNELS: dict[str, Callable[..., np.ndarray]] = {}


def _activation(op: str, f: Callable[..., np.ndarray], defaults: dict[str, float]) -> None:
    @_kernel(op)
    def k(ctx: OpContext, x: np.ndarray) -> np.ndarray:
        _check(op, "f", x)
        kw = {name: float(ctx.attr(name, d)) for name, d in defaults.items()}
        return f(_up(x), **kw).astype(x.dtype, copy=False)

    ACTIVATION_KERNELS[op] = k   # the function registered (its ``__wrapped__``), for a bind to find


for _op, (_f, _d) in _ACTIVATIONS.items():
    _activation(_op, _f, _d)


@_kernel("PRelu", since=7)
def prelu(ctx: OpContext, x: np.ndarray, slope: np.ndarray) -> np.ndarray:
    """Slope broadcasts unidirectionally to X; anything else is left to the reference."""
    _check("PRelu", "iuf", x, slope)
    if slope.ndim > x.ndim or any(s not in (1, d) for s, d in zip(slope.shape[::-1], x.shape[::-1])):
        raise Unsupported("PRelu: slope does not broadcast to X")
    return np.where(x > 0, x, x * slope)


@_kernel("Clip", out=True)
def clip(ctx: OpContext, x: np.ndarray, lo: np.ndarray | None = None, hi: np.ndarray | None = None,
         out: np.ndarray | None = None) -> np.ndarray:
    """Opset < 11 bounds are attributes; min > max yields max. np.clip, as onnx's reference:
    with scalar bounds it runs 6x faster than ``minimum(maximum())`` (whose scalar loops are
    slow) and gives the same numbers (a zero may differ in sign)."""
    _check("Clip", "iuf", x)
    if ctx.opset < 11:
        return np.minimum(np.maximum(x, ctx.attr("min", -_FLT_MAX)), ctx.attr("max", _FLT_MAX)).astype(x.dtype)
    for b in (lo, hi):
        if b is not None and (b.size != 1 or b.dtype != x.dtype):
            raise Unsupported("Clip: bounds must be scalars of the input dtype")
    if lo is None and hi is None:
        return x
    return np.clip(x, None if lo is None else lo.reshape(()), None if hi is None else hi.reshape(()),
                   out=_into(out, x.dtype, x))


# ---------------------------------------------------------------- binary tables
def _div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Integer division truncates toward zero (C semantics), not floor as in numpy."""
    if a.dtype.kind == "f":
        return np.divide(a, b)
    q = np.floor_divide(a, b)
    if a.dtype.kind == "i":
        q += ((np.remainder(a, b) != 0) & ((a < 0) ^ (b < 0))).astype(q.dtype)
    return q


_BINARY: dict[str, tuple[Callable[[np.ndarray, np.ndarray], np.ndarray], str, int]] = {
    # op: (function, allowed dtype kinds, first opset with numpy broadcasting)
    "Add": (np.add, "iuf", 7), "Sub": (np.subtract, "iuf", 7), "Mul": (np.multiply, "iuf", 7),
    "Div": (_div, "iuf", 7),
    "Equal": (np.equal, "biuf", 7), "Less": (np.less, "iuf", 7), "Greater": (np.greater, "iuf", 7),
    "LessOrEqual": (np.less_equal, "iuf", 12), "GreaterOrEqual": (np.greater_equal, "iuf", 12),
    "And": (np.logical_and, "b", 7), "Or": (np.logical_or, "b", 7), "Xor": (np.logical_xor, "b", 7),
}


_ARITH = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide}   # may write into out
BROADCAST_MIN = 1 << 15   # elements from which a broadcast along the last axis goes through channels.call


def _binary(op: str, f: Callable[[np.ndarray, np.ndarray], np.ndarray], kinds: str, since: int) -> None:
    ufunc = _ARITH.get(op)
    if ufunc is not None:
        _arith(op, ufunc, f, kinds, since)
        return

    @_kernel(op, since=since)
    def k(ctx: OpContext, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        _check(op, kinds, a, b)
        return f(a, b)


def _by_channels(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether one operand of a big broadcast repeats along the other's last axis, which
    ``channels.call`` runs (numpy's small buffer makes that slow)."""
    return a.shape != b.shape and bool(a.ndim and b.ndim) and a.shape[-1] != b.shape[-1] \
        and min(a.size, b.size) > 1 and max(a.size, b.size) >= BROADCAST_MIN


def _arith(op: str, ufunc: np.ufunc, f: Callable[[np.ndarray, np.ndarray], np.ndarray], kinds: str,
           since: int) -> None:
    """Add/Sub/Mul/Div into ``out`` when it fits, registered without ``_kernel``'s generic
    wrapper (see ``_unary``); integer Div truncates (``_div``)."""

    def kernel(ctx: OpContext, a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        d = a.dtype
        if b.dtype != d or (kinds, d) not in _CHECKED:
            _check(op, kinds, a, b)
        into = None
        if out is not None and out.dtype == d:
            shape = a.shape if a.shape == b.shape else _broadcast((a.shape, b.shape))
            into = out if out.shape == shape else None
        if _by_channels(a, b) and (op != "Div" or d.kind == "f"):
            with np.errstate(all="ignore"):
                return channels.call(ufunc, a, b, into)
        if is_quiet():
            res = ufunc(a, b, out=into) if op != "Div" or d.kind == "f" else f(a, b)
        else:
            with np.errstate(all="ignore"):
                res = ufunc(a, b, out=into) if op != "Div" or d.kind == "f" else f(a, b)
        return res if type(res) is np.ndarray else np.asarray(res)

    def bind(ctx: OpContext, a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None) -> Callable[[], Any] | None:
        """``kernel`` on fixed arrays: the ufunc alone where the kernel would call it, its checks done here."""
        d = a.dtype
        if not _accepts(op, kinds, a, b) or (op == "Div" and d.kind != "f") or (a.ndim == 0 and b.ndim == 0):
            return None
        if (a.shape != b.shape and _broadcast((a.shape, b.shape)) is None) or _by_channels(a, b):
            return None   # the ufunc's error, or the kernel's channels.call
        into = _into(out, d, a, b)
        if into is not None and a.shape != b.shape:   # into ``out``: operands numpy need not broadcast
            a, b = _unbroadcast(a, into), _unbroadcast(b, into)
        return partial(ufunc, a, b, out=into)

    kernel.__name__ = kernel.__qualname__ = op.lower()
    register(op, since=since, out=True, bind=bind)(kernel)


for _op, (_f2, _kinds, _since) in _BINARY.items():   # _f2: two-argument, unlike the _f above
    _binary(_op, _f2, _kinds, _since)


@_kernel("Not")
def not_(ctx: OpContext, x: np.ndarray) -> np.ndarray:
    _check("Not", "b", x)
    return np.logical_not(x)


@_kernel("Pow", since=7)
def pow_(ctx: OpContext, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The result keeps the base dtype whatever the exponent dtype."""
    _check("Pow", "iuf", a)
    _check("Pow", "iuf", b)
    if a.dtype.kind in "iu" and b.dtype.kind == "i" and (b < 0).any():
        raise Unsupported("Pow: negative integer exponent of an integer base")
    return np.power(a, b).astype(a.dtype, copy=False)


@_kernel("Mod", since=10)
def mod(ctx: OpContext, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """fmod=0: sign of the divisor (numpy mod); fmod=1: sign of the dividend (C fmod)."""
    _check("Mod", "iuf", a, b)
    return np.fmod(a, b) if ctx.attr("fmod", 0) == 1 else np.mod(a, b)


@_kernel("BitShift", since=11)
def bitshift(ctx: OpContext, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Shifts outside [0, bits) give the sign fill (opset 28 semantics, 0 for unsigned)."""
    _check("BitShift", "iu", x, y)
    bits = x.dtype.itemsize * 8
    valid = (y >= 0) & (y < bits)
    udt = np.dtype(f"u{x.dtype.itemsize}")
    amount = np.where(valid, y, 0).astype(udt)
    if ctx.attr("direction") == "RIGHT":
        out = np.right_shift(x, amount.astype(x.dtype))
        fill = np.where(x < 0, x.dtype.type(-1), x.dtype.type(0)) if x.dtype.kind == "i" else x.dtype.type(0)
    elif ctx.attr("direction") == "LEFT":
        out = np.left_shift(x.astype(udt), amount).astype(x.dtype)
        fill = x.dtype.type(0)
    else:
        raise Unsupported("BitShift: direction must be LEFT or RIGHT")
    return np.where(valid, out, fill).astype(x.dtype, copy=False)
