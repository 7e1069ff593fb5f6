"""The small ``ai.onnx.ml`` transforms and linear models, as numpy expressions over whole arrays
(onnx.reference loops over rows or elements for several): Binarizer, Scaler, Normalizer,
Imputer, ArrayFeatureExtractor, OneHotEncoder, LabelEncoder, LinearRegressor, LinearClassifier.

Each computes in the dtypes the reference does (float attributes are float32 there, so a
Scaler on float64 input scales by float32 factors), so results match it bit for bit wherever
the reference is itself a numpy expression.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from graphexec.kernels import cost_ops
from graphexec.kernels.ml_common import ML, floats, post_transform, softmax_zero
from graphexec.kernels.registry import OpContext, Unsupported, register


def _floats(op: str, x: np.ndarray) -> None:
    if x.dtype.kind not in "iuf":
        raise Unsupported(f"{op}: input dtype {x.dtype}")


@register("Binarizer", domain=ML)
def binarizer(ctx: OpContext, x: np.ndarray) -> np.ndarray:
    _floats(ctx.op, x)
    return (x > ctx.attr("threshold", 0.0)).astype(x.dtype)


@register("Scaler", domain=ML)
def scaler(ctx: OpContext, x: np.ndarray) -> np.ndarray:
    _floats(ctx.op, x)
    offset, scale = floats(ctx, "offset", default=[0.0]), floats(ctx, "scale", default=[1.0])
    return ((x - offset) * scale).astype(x.dtype)


@register("Normalizer", domain=ML)
def normalizer(ctx: OpContext, x: np.ndarray) -> np.ndarray:
    _floats(ctx.op, x)
    norm = ctx.attr("norm", "MAX")
    if x.ndim != 2 or norm not in ("MAX", "L1", "L2"):
        raise Unsupported(f"Normalizer: rank {x.ndim}, norm {norm!r}")
    if norm == "MAX":
        div = np.abs(x).max(axis=1)
    elif norm == "L1":
        div = np.abs(x).sum(axis=1)
    else:
        div = np.sqrt(np.square(x).sum(axis=1))
    return x / np.maximum(div.reshape(len(x), -1), 1e-30)


@register("Imputer", domain=ML)
def imputer(ctx: OpContext, x: np.ndarray) -> np.ndarray:
    floats, ints = ctx.attr("imputed_value_floats", None), ctx.attr("imputed_value_int64s", None)
    values, replace = (floats, ctx.attr("replaced_value_float", 0.0)) if floats else \
        (ints, ctx.attr("replaced_value_int64", 0))
    if not values or x.ndim != 2 or len(values) not in (x.shape[1], 1) or x.dtype.kind not in "iuf":
        raise Unsupported(f"Imputer: {x.shape} {x.dtype} with {len(values or [])} values")
    vals = np.broadcast_to(np.array(values).astype(x.dtype), (x.shape[1],))
    hit = np.isnan(x) if np.isnan(replace) else x == replace
    return np.where(hit, vals, x)


@register("ArrayFeatureExtractor", domain=ML)
def array_feature_extractor(ctx: OpContext, data: np.ndarray, indices: np.ndarray) -> np.ndarray:
    index = indices.reshape(-1)
    n = data.shape[-1] if data.ndim else 0
    if index.dtype.kind not in "iu" or (index.size and ((index < -n) | (index >= n)).any()):
        raise Unsupported("ArrayFeatureExtractor: indices out of range")
    shape = (1, index.size) if data.ndim == 1 else (*data.shape[:-1], index.size)
    return data[..., index].reshape(shape)


@register("OneHotEncoder", domain=ML)
def one_hot_encoder(ctx: OpContext, x: np.ndarray) -> np.ndarray:
    ints, strings = ctx.attr("cats_int64s", None), ctx.attr("cats_strings", None)
    cats = np.array(ints) if ints else np.array(strings or [], dtype=str)
    if not len(cats) or len(set(cats.tolist())) != len(cats) or x.ndim not in (1, 2):
        raise Unsupported("OneHotEncoder: no or repeated categories, or rank above 2")
    vals = x.astype(str) if cats.dtype.kind == "U" else x
    if cats.dtype.kind == "U" and x.dtype.kind not in "OUS":
        raise Unsupported("OneHotEncoder: string categories for numbers")
    res = (vals[..., None] == cats).astype(np.float32)
    if not ctx.attr("zeros", 1) and (res.sum(axis=-1) == 0).any():
        raise Unsupported("OneHotEncoder: a value of no category with zeros=0")   # the reference's error
    return res


_LABEL_DEFAULTS = {"values_floats": ("default_float", -0.0, np.float32),
                   "values_int64s": ("default_int64", -1, np.int64),
                   "values_strings": ("default_string", "_Unused", np.str_)}


def _label_table(ctx: OpContext) -> tuple[np.ndarray, np.ndarray, Any, Any]:
    """(sorted keys, their values, default, output dtype); the last of repeated keys wins, as in a dict."""
    a = ctx.attrs
    keys = next((a[k] for k in ("keys_floats", "keys_int64s", "keys_strings", "keys_tensor") if a.get(k) is not None
                 and len(a[k])), None)
    vname = next((k for k in ("values_floats", "values_int64s", "values_strings", "values_tensor")
                  if a.get(k) is not None and len(a[k])), None)
    if keys is None or vname is None:
        raise Unsupported("LabelEncoder: no keys or values")
    if vname == "values_tensor":
        default = a.get("default_tensor")
        if default is None:
            raise Unsupported("LabelEncoder: values_tensor without default_tensor")
        dflt, otype = default.item(), default.dtype
    else:
        name, fallback, otype = _LABEL_DEFAULTS[vname]
        dflt = a.get(name, fallback)
    table = dict(zip(np.asarray(keys).tolist(), np.asarray(a[vname]).tolist()))
    k = np.array(list(table))
    order = np.argsort(k, kind="stable")
    return k[order], np.array(list(table.values()), dtype=otype)[order], dflt, otype


@register("LabelEncoder", domain=ML)
def label_encoder(ctx: OpContext, x: np.ndarray) -> np.ndarray:
    if "labels" not in ctx.cache:
        ctx.cache["labels"] = _label_table(ctx)
    keys, values, dflt, otype = ctx.cache["labels"]
    if (keys.dtype.kind == "U") != (x.dtype.kind in "OUS"):
        raise Unsupported("LabelEncoder: keys and input of different kinds")
    vals = x.astype(str) if x.dtype.kind in "OS" else x
    pos = np.minimum(np.searchsorted(keys, vals), len(keys) - 1)
    found = keys[pos] == vals
    out = np.where(found, values[pos], np.array(dflt, dtype=otype))
    return out.astype(otype, copy=False)


@register("LinearRegressor", domain=ML, cost=cost_ops.per_row(lambda f, a: 2 * len(a.get("coefficients") or [])))
def linear_regressor(ctx: OpContext, x: np.ndarray) -> np.ndarray:
    if x.dtype not in (np.float32, np.float64) or ctx.attr("post_transform", "NONE") != "NONE":
        raise Unsupported(f"LinearRegressor: {x.dtype}, post_transform")
    targets = int(ctx.attr("targets", 1))
    coef = floats(ctx, "coefficients", x.dtype)
    if coef is None:
        raise Unsupported("LinearRegressor: no coefficients")
    score = np.dot(x.reshape(1, -1) if x.ndim == 1 else x, coef.reshape(targets, -1).T)
    intercepts = floats(ctx, "intercepts", x.dtype)
    if intercepts is not None:
        score += intercepts
    return score


@register("LinearClassifier", domain=ML, cost=cost_ops.per_row(lambda f, a: 2 * len(a.get("coefficients") or [])))
def linear_classifier(ctx: OpContext, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    _floats(ctx.op, x)
    x = x if x.dtype == np.float64 else x.astype(np.float32)
    x = x.reshape(1, -1) if x.ndim == 1 else x
    ints, strings = ctx.attr("classlabels_ints", None), ctx.attr("classlabels_strings", None)
    flat = floats(ctx, "coefficients", x.dtype)
    if flat is None:
        raise Unsupported("LinearClassifier: no coefficients")
    coef = flat.reshape(-1, x.shape[1]).T
    scores = np.dot(x, coef)
    intercepts = floats(ctx, "intercepts", x.dtype)
    if intercepts is not None:
        scores += intercepts
    if coef.shape[1] == 1 and max(len(ints or []), len(strings or [])) == 2:
        scores = np.concatenate([-scores, scores], axis=1).astype(np.float32)
    scores = _linear_post(ctx, scores)
    if scores.shape[1] > 1:
        best = np.argmax(scores, axis=1)
        labels = np.array(ints, dtype=np.int64)[best] if ints else (np.array(strings)[best] if strings else best)
        return labels, scores
    if strings:
        raise Unsupported("LinearClassifier: one score column with string labels")
    hit = scores >= (0 if ctx.attr("post_transform", "NONE") == "NONE" else 0.5)
    return (np.where(hit, ints[0], 0) if ints else hit).astype(np.int64).ravel(), scores


def _linear_post(ctx: OpContext, scores: np.ndarray) -> np.ndarray:
    """LinearClassifier's own spelling of the transforms (expit, not the mirrored logistic)."""
    how = ctx.attr("post_transform", "NONE")
    if how == "LOGISTIC":
        return (1.0 / (1.0 + np.exp(-scores))).astype(scores.dtype)
    if how == "SOFTMAX":
        np.subtract(scores, scores.max(axis=1, keepdims=True), out=scores)
        e = np.exp(scores)
        return np.divide(e, e.sum(axis=1, keepdims=True))
    if how == "SOFTMAX_ZERO":
        return softmax_zero(scores)
    return post_transform(ctx, scores)

