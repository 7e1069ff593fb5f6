"""Dense and normalization kernels: Gemm, MatMul, BatchNormalization, Softmax,
LogSoftmax, LayerNormalization, LRN, Dropout (inference), Gelu.

float16 is computed in float32 and cast back (numpy's float16 arithmetic is slow
and less accurate); python-float attributes never promote float32 to float64.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from graphexec.kernels import channels
from graphexec.kernels.gelu_erf import gelu_erf, gelu_erf_whole
from graphexec.kernels.registry import OpContext, Unsupported, fits, register

_FLOATS = (np.float16, np.float32, np.float64)
_MATMUL_TYPES = _FLOATS + (np.int32, np.int64, np.uint32, np.uint64)


def _work(x: np.ndarray, op: str, types: tuple = _FLOATS) -> np.ndarray:
    """``x`` in its compute dtype (float16 -> float32); other dtypes go to the fallback."""
    if x.dtype.type not in types:
        raise Unsupported(f"{op}: dtype {x.dtype}")
    return x.astype(np.float32) if x.dtype == np.float16 else x


@register("MatMul", out=True)
def matmul(ctx: OpContext, a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """numpy matmul has exactly ONNX's broadcasting and 1-d promotion rules; a product of
    matrices (or stacks of them) in its own dtype goes straight into ``out``."""
    if a.dtype != b.dtype:
        raise Unsupported(f"MatMul: mixed dtypes {a.dtype}/{b.dtype}")
    wa, wb = _work(a, "MatMul", _MATMUL_TYPES), _work(b, "MatMul", _MATMUL_TYPES)
    shape = _matmul_shape(a, b) if out is not None and wa.dtype == a.dtype else None
    into = out if shape is not None and fits(out, shape, a.dtype) else None
    return np.matmul(wa, wb, out=into).astype(a.dtype, copy=False)


def _matmul_shape(a: np.ndarray, b: np.ndarray) -> tuple[int, ...] | None:
    """The output shape of matrices (or stacks) ``a @ b``; None for a 1-d operand, or a
    mismatch numpy should report itself."""
    if a.ndim < 2 or b.ndim < 2 or a.shape[-1] != b.shape[-2]:
        return None
    lead = a.shape[:-2] if b.ndim == 2 or a.shape[:-2] == b.shape[:-2] else None
    if lead is None:
        try:
            lead = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        except ValueError:
            return None
    return (*lead, a.shape[-2], b.shape[-1])


@register("Gemm", out=True)
def gemm(ctx: OpContext, a: np.ndarray, b: np.ndarray, c: np.ndarray | None = None,
         out: np.ndarray | None = None) -> np.ndarray:
    """alpha * A' @ B' + beta * C with C unidirectionally broadcast."""
    if a.ndim != 2 or b.ndim != 2 or a.dtype != b.dtype:
        raise Unsupported(f"Gemm: shapes {a.shape}/{b.shape} dtypes {a.dtype}/{b.dtype}")
    alpha, beta, trans_a, trans_b = _gemm_attrs(ctx)
    if a.dtype.kind != "f" and (alpha != 1.0 or beta != 1.0):
        raise Unsupported("Gemm: integer inputs with alpha/beta != 1")
    wa, wb = _work(a, "Gemm", _MATMUL_TYPES), _work(b, "Gemm", _MATMUL_TYPES)
    wa, wb = wa.T if trans_a else wa, wb.T if trans_b else wb
    into = out if wa.dtype == a.dtype and wa.shape[1] == wb.shape[0] and \
        fits(out, (wa.shape[0], wb.shape[1]), a.dtype) else None
    y = np.matmul(wa, wb, out=into)
    if alpha != 1.0:
        y *= alpha
    if c is not None and beta != 0.0:
        if ctx.opset < 7 and not ctx.attr("broadcast", 0) and c.shape != y.shape:
            raise Unsupported("Gemm: broadcast=0 with a C of another shape")
        if not _fits_into(c.shape, y.shape) and np.broadcast_shapes(c.shape, y.shape) != y.shape:
            raise Unsupported(f"Gemm: C {c.shape} does not broadcast to {y.shape}")
        y += _work(c, "Gemm", _MATMUL_TYPES) * beta if beta != 1.0 else c
    return y.astype(a.dtype, copy=False)


def _gemm_attrs(ctx: OpContext) -> tuple[float, float, bool, bool]:
    """(alpha, beta, transA, transB), read once per node (four attribute lookups a run before)."""
    hit = ctx.cache.get("gemm")
    if hit is None:
        hit = ctx.cache["gemm"] = (float(ctx.attr("alpha", 1.0)), float(ctx.attr("beta", 1.0)),
                                   bool(ctx.attr("transA", 0)), bool(ctx.attr("transB", 0)))
    return hit


def _fits_into(c: tuple[int, ...], y: tuple[int, ...]) -> bool:
    """Whether ``c`` broadcasts unidirectionally to ``y`` (numpy's rule, without
    np.broadcast_shapes' ~4 us of Python on a small Gemm); False may still be a fit."""
    return len(c) <= len(y) and all(d == 1 or d == e for d, e in zip(c[::-1], y[::-1]))


@register("BatchNormalization", out=True)
def batch_norm(ctx: OpContext, x: np.ndarray, scale: np.ndarray, b: np.ndarray,
               mean: np.ndarray, var: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Inference form (x - mean) / sqrt(var + eps) * scale + B per channel (axis 1), computed
    as x * k + (B - mean * k): two passes, with k and the shift derived once per node when
    the statistics are constants."""
    if ctx.opset < 7 and not ctx.attr("is_test", 0):
        raise Unsupported("BatchNormalization: is_test=0 means training statistics")
    if ctx.opset < 9 and not ctx.attr("spatial", 1):
        raise Unsupported("BatchNormalization: spatial=0")
    if ctx.attr("training_mode", 0) or ctx.num_outputs > 1:
        raise Unsupported("BatchNormalization: training mode / running-statistics outputs")
    if x.ndim < 2:
        raise Unsupported(f"BatchNormalization: rank {x.ndim}")
    xw = _work(x, "BatchNormalization")
    for p in (scale, b, mean, var):
        _work(p, "BatchNormalization")
    dt = np.result_type(xw, scale, b, mean, var, np.float32)
    k, shift = _bn_coefficients(ctx, dt, x.ndim, scale, b, mean, var)
    if dt == x.dtype and out is not None and out.shape == x.shape and out.dtype == x.dtype:
        channels.apply(np.multiply, x, k, out)
        channels.apply(np.add, out, shift, out)
        return out
    y = xw * k if xw.dtype == dt else xw.astype(dt) * k
    y += shift
    return y.astype(x.dtype, copy=False)


def _bn_coefficients(ctx: OpContext, dt: np.dtype, ndim: int, *params: np.ndarray) -> tuple[np.ndarray, ...]:
    """(k, shift) shaped to broadcast over axis 1, cached on the node when all four are constants."""
    key = ("bn", dt, ndim)
    const = len(ctx.const_inputs) == 5 and all(ctx.const_inputs[1:])
    hit = ctx.cache.get(key) if const else None
    if hit is not None:
        return hit
    scale, b, mean, var = (np.asarray(v, dtype=dt).reshape((-1,) + (1,) * (ndim - 2)) for v in params)
    k = scale / np.sqrt(var + dt.type(ctx.attr("epsilon", 1e-5)))
    res = (k, b - mean * k)
    if const:
        ctx.cache[key] = res
    return res


def _softmax_frame(ctx: OpContext, x: np.ndarray) -> tuple[np.ndarray, int]:
    """(view, axis) to normalize over: opset < 13 flattens to 2-d at ``axis``, 13+ is per-axis."""
    axis = int(ctx.attr("axis", 1 if ctx.opset < 13 else -1))
    if x.size == 0:  # max() has nothing to reduce; the reference returns the empty tensor
        raise Unsupported(f"{ctx.op}: empty input")
    if not -x.ndim <= axis < max(x.ndim, 1):
        raise Unsupported(f"{ctx.op}: axis {axis} for rank {x.ndim}")
    axis %= max(x.ndim, 1)
    # float16 stays float16, as onnx's own expected values are computed
    xw = x if x.dtype == np.float16 else _work(x, ctx.op)
    if ctx.opset < 13:
        rows = int(np.prod(x.shape[:axis], dtype=np.int64))
        return xw.reshape(rows, -1), 1
    return xw, axis


def _row_max(v: np.ndarray, axis: int) -> np.ndarray:
    """``v.max(axis, keepdims=True)``; rows along a short last axis go through a transposed
    copy, as numpy's max reduce costs ~50 ns a row whatever its length (attention scores
    (1,12,32,32): 20 -> 6 us). A max is exact in any order: the same numbers."""
    n = v.shape[axis]
    if axis == v.ndim - 1 and 1 < n <= 64 and v.size >= 64 * n:
        t = np.ascontiguousarray(v.reshape(-1, n).T)
        return np.maximum.reduce(t, axis=0).reshape(v.shape[:-1] + (1,))
    return v.max(axis=axis, keepdims=True)


@register("Softmax", out=True)
def softmax(ctx: OpContext, x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """exp(x - max) / sum, shifted by the max for stability; into ``out`` when it fits."""
    v, axis = _softmax_frame(ctx, x)
    e = np.subtract(v, _row_max(v, axis), out=out if v is x and fits(out, x.shape, x.dtype) else None)
    np.exp(e, out=e)
    e /= e.sum(axis=axis, keepdims=True)
    return (e if e.shape == x.shape else e.reshape(x.shape)).astype(x.dtype, copy=False)



@register("LogSoftmax")
def log_softmax(ctx: OpContext, x: np.ndarray) -> np.ndarray:
    """(x - max) - log(sum(exp(x - max)))."""
    v, axis = _softmax_frame(ctx, x)
    s = v - _row_max(v, axis)
    s -= np.log(np.exp(s).sum(axis=axis, keepdims=True))
    return s.reshape(x.shape).astype(x.dtype, copy=False)


@register("LayerNormalization", since=17, out=True)
def layer_norm(ctx: OpContext, x: np.ndarray, scale: np.ndarray, b: np.ndarray | None = None,
               out: np.ndarray | None = None):
    """Normalize over axes [axis, rank); statistics in float32 (stash_type=1) or wider."""
    if int(ctx.attr("stash_type", 1)) != 1:
        raise Unsupported("LayerNormalization: stash_type != 1")
    if ctx.num_outputs > 1 and x.dtype != np.float32:
        raise Unsupported("LayerNormalization: Mean/InvStdDev dtype for non-float32 input")
    axis = int(ctx.attr("axis", -1))
    if not -x.ndim <= axis < x.ndim:
        raise Unsupported(f"LayerNormalization: axis {axis} for rank {x.ndim}")
    axis %= x.ndim
    xw = _work(x, "LayerNormalization")
    red = tuple(range(axis, x.ndim))
    eps = xw.dtype.type(ctx.attr("epsilon", 1e-5))
    if xw.dtype == x.dtype == scale.dtype and (b is None or b.dtype == x.dtype) and x.size:
        y, mean, inv = _layer_norm_into(xw, scale, b, red, eps, out if fits(out, x.shape, x.dtype) else None)
    else:
        mean = xw.mean(axis=red, keepdims=True)
        d = xw - mean
        var = np.mean(d * d, axis=red, keepdims=True)
        inv = 1 / np.sqrt(var + eps)
        y = d * inv * _work(scale, "LayerNormalization")
        if b is not None:
            y += _work(b, "LayerNormalization")
        y = y.astype(x.dtype, copy=False)
    return (y, mean, inv)[:max(ctx.num_outputs, 1)] if ctx.num_outputs > 1 else y


def _layer_norm_into(x: np.ndarray, scale: np.ndarray, b: np.ndarray | None, red: tuple[int, ...], eps: Any,
                     out: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(y, mean, inv_std) when every operand has one dtype: the general path's operations
    (np.mean is a sum, then a division by the count as an intp), so the same bits, but y
    is computed in ``out`` (the output's bytes: no copy into them afterwards)."""
    count = np.intp(math.prod(x.shape[i] for i in red))
    mean = np.add.reduce(x, axis=red, keepdims=True)
    np.true_divide(mean, count, out=mean, casting="unsafe")
    d = np.subtract(x, mean, out=out if out is not None and not np.may_share_memory(out, x) else None)
    var = np.add.reduce(d * d, axis=red, keepdims=True)
    np.true_divide(var, count, out=var, casting="unsafe")
    var += eps
    np.sqrt(var, out=var)
    inv = np.divide(1, var, out=var)
    d *= inv
    d *= scale
    if b is not None:
        d += b
    return d, mean, inv


@register("LRN")
def lrn(ctx: OpContext, x: np.ndarray) -> np.ndarray:
    """x / (bias + alpha/size * sum of squares over a channel window) ** beta."""
    if x.ndim < 3:
        raise Unsupported(f"LRN: rank {x.ndim}")
    size = int(ctx.attr("size"))
    xw = _work(x, "LRN")
    alpha, beta, bias = (float(ctx.attr(k, d)) for k, d in (("alpha", 1e-4), ("beta", 0.75), ("bias", 1.0)))
    before, after = (size - 1) // 2, size - 1 - (size - 1) // 2
    sq = xw * xw
    pad = np.zeros((x.shape[0], x.shape[1] + size - 1) + x.shape[2:], dtype=xw.dtype)
    pad[:, before:before + x.shape[1]] = sq
    ssum = pad[:, 0:x.shape[1]].copy()
    for j in range(1, before + after + 1):
        ssum += pad[:, j:j + x.shape[1]]
    return (xw / (bias + (alpha / size) * ssum) ** beta).astype(x.dtype, copy=False)


@register("Dropout")
def dropout(ctx: OpContext, x: np.ndarray, ratio: np.ndarray | None = None,
            training_mode: np.ndarray | None = None):
    """Inference is the identity; the mask (opset 12+) is all True."""
    if ctx.opset < 7 and not ctx.attr("is_test", 0):
        raise Unsupported("Dropout: is_test=0 (training) before opset 7")
    if training_mode is not None and bool(np.asarray(training_mode)):
        r = 0.5 if ratio is None else float(np.asarray(ratio))
        if r != 0.0:
            raise Unsupported("Dropout: training_mode with ratio > 0 is random")
    if ctx.num_outputs < 2:
        return x.copy()
    # Before opset 12 the inference mask is unspecified: onnxruntime returns all False/0, the
    # onnx reference (this kernel's fallback until now, so the recorded results) all True.
    return x.copy(), np.ones(x.shape, dtype=bool)


def _gelu_tanh(x: np.ndarray) -> np.ndarray:
    """x * sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3): no cancellation for negative x;
    float32 math for float16/32 (like onnxruntime), float64 for float64."""
    xw = x.astype(np.float32) if x.dtype == np.float16 else x
    e = xw * xw
    e *= 0.044715
    e += 1.0
    e *= xw
    e *= -2.0 * math.sqrt(2 / math.pi)
    with np.errstate(over="ignore"):
        np.exp(e, out=e)
    e += 1.0
    return np.divide(xw, e, out=e)


@register("Gelu", since=20)
def gelu(ctx: OpContext, x: np.ndarray) -> np.ndarray:
    """0.5 x (1 + erf(x/sqrt2)), or the tanh form written as x * sigmoid(2u) to avoid cancellation."""
    approx = ctx.attr("approximate", "none")
    if x.dtype.type not in _FLOATS:
        raise Unsupported(f"Gelu: dtype {x.dtype}")
    if approx not in ("tanh", "none"):
        raise Unsupported(f"Gelu: approximate={approx!r}")
    x1 = x.reshape(1) if x.ndim == 0 else x   # the in-place steps need arrays, not numpy scalars
    if approx == "tanh":
        y = _gelu_tanh(x1)
    elif x.dtype == np.float64:
        y = gelu_erf_whole(x1)
    else:   # float64 math in cache-sized pieces, rounded once to x's dtype: the same bits
        y = gelu_erf(x1, x.dtype)
    return y.reshape(x.shape).astype(x.dtype, copy=False)
