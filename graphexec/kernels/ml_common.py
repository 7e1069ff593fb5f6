"""What the ``ai.onnx.ml`` classifiers share: post transforms and the label outputs, vectorized
in the arithmetic of onnx.reference's ``_common_classifier`` (float32 in, float32 out)."""

from __future__ import annotations

from typing import Any

import numpy as np

from graphexec.kernels.registry import OpContext, Unsupported

ML = "ai.onnx.ml"


def logistic(v: np.ndarray) -> np.ndarray:
    """1 / (1 + e^-|v|), mirrored for v < 0 (no overflow for large |v|)."""
    e = 1.0 / (1.0 + np.exp(-np.abs(v)))
    return np.where(v < 0, 1.0 - e, e).astype(v.dtype, copy=False)


def softmax(v: np.ndarray) -> np.ndarray:
    v = v - v.max(axis=1, keepdims=True)
    np.exp(v, out=v)
    v /= v.sum(axis=1, keepdims=True)
    return v


def softmax_zero(v: np.ndarray) -> np.ndarray:
    """Softmax where values within 1e-7 of zero keep their value scaled by e^-max instead of
    e^(v - max); a row summing to 0 becomes 0.5 everywhere (the reference's row loop)."""
    top = v.max(axis=1, keepdims=True)
    near_zero = (v <= 0.0000001) & (v >= -0.0000001)
    out = np.where(near_zero, v * np.exp(-top), np.exp(v - top)).astype(v.dtype, copy=False)
    s = np.zeros((len(v), 1), dtype=v.dtype)
    for j in range(v.shape[1]):   # the reference sums left to right
        s[:, 0] += out[:, j]
    with np.errstate(all="ignore"):
        return np.where(s == 0, v.dtype.type(0.5), out / s).astype(v.dtype, copy=False)


def _erf_inv(x: np.ndarray) -> np.ndarray:
    sgn = np.where(x < 0, -1, 1).astype(x.dtype)
    x = (1.0 - x) * (1 + x)
    with np.errstate(all="ignore"):
        log = np.log(x)
        v = 2.0 / (np.pi * 0.147) + 0.5 * log
        v2 = 1.0 / 0.147 * log
        v3 = -v + np.sqrt(v * v - v2)
        return np.where(x == 0, 0, sgn * np.sqrt(v3))


def probit(v: np.ndarray) -> np.ndarray:
    return (1.41421356 * _erf_inv(v * 2 - 1)).astype(v.dtype, copy=False)


POST = {None: lambda v: v, "NONE": lambda v: v, "LOGISTIC": logistic, "SOFTMAX": softmax,
        "SOFTMAX_ZERO": softmax_zero, "PROBIT": probit}


def post_transform(ctx: OpContext, scores: np.ndarray) -> np.ndarray:
    name = ctx.attr("post_transform", "NONE")
    if name not in POST:
        raise Unsupported(f"{ctx.op}: post_transform {name!r}")
    return POST[name](scores)


def labels_of(classes: Any, index: np.ndarray) -> np.ndarray:
    """The class labels at ``index`` (int64 or strings)."""
    arr = np.asarray(classes)
    if arr.dtype.kind in "iu":
        return arr.astype(np.int64)[index]
    return np.array([classes[i] for i in index]) if len(index) else np.array([], dtype=arr.dtype)


def as_rows(op: str, x: np.ndarray, to: Any = np.float32) -> np.ndarray:
    """Input ``X`` as a 2-D array of ``to`` (the models take [N, F] or one row [F])."""
    if x.dtype.kind not in "iuf" or x.ndim > 2:
        raise Unsupported(f"{op}: input {x.dtype} of rank {x.ndim}")
    x = x.reshape(1, -1) if x.ndim < 2 else x
    return x if to is None or x.dtype == to else x.astype(to)


def floats(ctx: OpContext, name: str, dtype: Any = np.float32, default: Any = None) -> np.ndarray | None:
    """A float-list attribute as an array of ``dtype`` (through float32, as the reference holds
    such attributes), converted once per node and kept in its cache; None where absent."""
    key = ("floats", name, np.dtype(dtype).str)
    if key not in ctx.cache:
        value = ctx.attrs.get(name, default)
        ctx.cache[key] = None if value is None else np.array(value, dtype=np.float32).astype(dtype)
    return ctx.cache[key]


def need_floats(ctx: OpContext, name: str, dtype: Any = np.float32) -> np.ndarray:
    """``floats`` of an attribute the op cannot do without (Unsupported where absent)."""
    got = floats(ctx, name, dtype)
    if got is None:
        raise Unsupported(f"{ctx.op}: no {name}")
    return got
