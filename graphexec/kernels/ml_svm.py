"""SVMRegressor and SVMClassifier (``ai.onnx.ml``), all rows at once.

onnx.reference evaluates the kernel of every (row, support vector) pair in Python; here the
kernel matrix is one product (``X @ SV^T``; RBF distances from it in float64, which is at
least as accurate as the reference's float32 sums), and the pairwise one-vs-one scores are
a matrix-vector product per class pair. Sums run in another order than the reference's, so
scores agree within float32 rounding and the labels (votes, argmax) agree exactly away from
ties. Probability outputs (``prob_a``) are left to the reference.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from graphexec.kernels import cost_ops
from graphexec.kernels.ml_common import ML, POST, labels_of, need_floats
from graphexec.kernels.ml_svm_proba import couple, pairwise
from graphexec.kernels.registry import OpContext, Unsupported, register


def _params(ctx: OpContext) -> tuple[float, float, int]:
    p = ctx.attr("kernel_params", None)
    return (float(np.float32(p[0])), float(np.float32(p[1])), int(p[2])) if p else (0.0, 0.0, 0)


def kernel_matrix(ctx: OpContext, x: np.ndarray, sv: np.ndarray, kind: str) -> np.ndarray:
    """[rows, vectors] kernel values in x's dtype."""
    gamma, coef0, degree = _params(ctx)
    kind = kind.lower()
    if kind == "rbf":
        x64, sv64 = x.astype(np.float64), sv.astype(np.float64)
        d = (x64 * x64).sum(axis=1)[:, None] + (sv64 * sv64).sum(axis=1) - 2.0 * (x64 @ sv64.T)
        return np.exp(-gamma * np.maximum(d, 0.0)).astype(x.dtype)
    dot = x @ sv.T
    if kind == "linear":
        return dot
    s = dot * x.dtype.type(gamma) + x.dtype.type(coef0)
    if kind == "poly":
        return s ** degree
    if kind == "sigmoid":
        return np.tanh(s)
    raise Unsupported(f"{ctx.op}: kernel {kind!r}")


def _svm_cost(feats: int, attrs: dict) -> float:
    """Per row: one kernel per support vector (or coefficient row) over the features."""
    vectors = len(attrs.get("support_vectors") or []) // max(feats, 1)
    return 2.0 * feats * max(vectors, 1) + 2.0 * len(attrs.get("coefficients") or [])


def _rows(ctx: OpContext, x: np.ndarray) -> np.ndarray:
    if x.dtype not in (np.float32, np.float64):
        raise Unsupported(f"{ctx.op}: input {x.dtype}")
    return x.reshape(1, -1) if x.ndim == 1 else x


@register("SVMRegressor", domain=ML, cost=cost_ops.per_row(_svm_cost))
def svm_regressor(ctx: OpContext, x: np.ndarray) -> np.ndarray:
    x = _rows(ctx, x)
    if ctx.attr("post_transform", "NONE") != "NONE":
        raise Unsupported("SVMRegressor: post_transform")
    coef = need_floats(ctx, "coefficients", x.dtype)
    rho = x.dtype.type(np.float32(ctx.attr("rho")[0]))
    n_sv = int(ctx.attr("n_supports", 0))
    if n_sv > 0:
        sv = need_floats(ctx, "support_vectors", x.dtype).reshape(n_sv, -1)
        s = kernel_matrix(ctx, x, sv, ctx.attr("kernel_type", "LINEAR")) @ coef + rho
    else:
        s = x @ coef + rho
    if ctx.attr("one_class", 0):
        s = np.where(s > 0, 1, -1).astype(x.dtype)
    return s.reshape(-1, 1)


def _one_vs_one(ctx: OpContext, k: np.ndarray, coefs: np.ndarray, per_class: list[int],
                rho: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(votes [rows, classes], scores [rows, pairs]) of the pairwise classifiers."""
    starts = np.concatenate([[0], np.cumsum(per_class)]).astype(int)
    c = len(per_class)
    votes = np.zeros((len(k), c), dtype=k.dtype)
    scores: list[np.ndarray] = []
    for i in range(c):
        bi = slice(starts[i], starts[i + 1])
        for j in range(i + 1, c):
            bj = slice(starts[j], starts[j + 1])
            s = rho[len(scores)] + k[:, bi] @ coefs[j - 1, bi] + k[:, bj] @ coefs[i, bj]
            votes[:, i] += s > 0
            votes[:, j] += s <= 0
            scores.append(s)
    return votes, np.stack(scores, axis=1).astype(k.dtype)


def _binary_scores(how: str, s: np.ndarray, two: bool) -> np.ndarray:
    """One score column: the reference's ``write_scores`` for one score."""
    if how == "PROBIT":
        return POST["PROBIT"](s)
    if not two:
        return s
    pair = np.concatenate([-s, s], axis=1)
    return POST[how](pair) if how in ("LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO") else pair


@register("SVMClassifier", domain=ML, cost=cost_ops.per_row(_svm_cost))
def svm_classifier(ctx: OpContext, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    x = _rows(ctx, x)
    ints, strings = ctx.attr("classlabels_ints", None), ctx.attr("classlabels_strings", None)
    how = ctx.attr("post_transform", "NONE")
    if how not in POST:
        raise Unsupported(f"SVMClassifier: post_transform {how!r}")
    n_class = max(len(ints or strings or []), 1)
    per_class = [int(v) for v in ctx.attr("vectors_per_class", None) or []]
    coef32, rho = need_floats(ctx, "coefficients"), need_floats(ctx, "rho", x.dtype)
    n_vec = sum(per_class)
    if n_vec > 0:
        sv = need_floats(ctx, "support_vectors", x.dtype).reshape(n_vec, -1)
        k = kernel_matrix(ctx, x, sv, ctx.attr("kernel_type", "LINEAR"))
        votes, scores = _one_vs_one(ctx, k, coef32.astype(x.dtype).reshape(-1, n_vec), per_class, rho)
        best = np.argmax(votes, axis=1)
        weight = votes[np.arange(len(x)), best]
        if ctx.attr("prob_a", None):   # scores become class probabilities; the label is still the vote's
            return _probabilities(ctx, x, scores, ints, strings, best, weight, len(rho), how)
    else:
        scores = (x @ coef32.astype(x.dtype).reshape(n_class, -1).T + rho[0]).astype(x.dtype)
        best = np.argmax(scores, axis=1)
        weight = scores[np.arange(len(x)), best]
    labels = _labels(ctx, ints, strings, best, weight, len(rho), bool(coef32.min() >= 0))
    if scores.shape[1] == 1:
        return labels, _binary_scores(how, scores, len(ints or []) == 2).astype(x.dtype)
    return labels, POST[how](scores.copy()).astype(x.dtype)


def _probabilities(ctx: OpContext, x: np.ndarray, scores: np.ndarray, ints: Any, strings: Any,
                   best: np.ndarray, weight: np.ndarray, n_rho: int, how: str) -> tuple[np.ndarray, np.ndarray]:
    """Labels and scores of an SVC with Platt's probabilities (``ml_svm_proba``): the reference's
    labels with probabilities on (the winning class, no rule on its weight), its post_transform
    applied to the probabilities."""
    n_class = len(ints or strings or [])
    a, b = need_floats(ctx, "prob_a", x.dtype), need_floats(ctx, "prob_b", x.dtype)
    if n_class < 2 or len(a) != scores.shape[1] or len(b) != len(a) or scores.shape[1] != n_class * (n_class - 1) // 2:
        raise Unsupported(f"SVMClassifier: {len(a)} probability pairs for {n_class} classes")
    proba = couple(pairwise(scores, a, b, n_class))
    labels = _labels(ctx, ints, strings, best, weight, n_rho, False)
    return labels, POST[how](proba).astype(x.dtype)


def _labels(ctx: OpContext, ints: Any, strings: Any, best: np.ndarray, weight: np.ndarray, n_rho: int,
            positive: bool) -> np.ndarray:
    """The reference's label rules: one decision function (one rho) picks between two labels
    by the winning weight, or 1/0 by its sign; several pick the class that won."""
    if n_rho == 1:
        if not ints:
            raise Unsupported("SVMClassifier: one decision function without int labels")
        if len(ints) == 2:
            idx = np.where(positive & (weight >= 0.5), 1, best) if positive else best
            return np.array(ints, dtype=np.int64)[idx]
        return np.where(weight > 0, 1, 0).astype(np.int64)
    if strings:
        return labels_of(strings, best)
    return np.array(ints, dtype=np.int64)[best] if ints else best.astype(np.int64)
