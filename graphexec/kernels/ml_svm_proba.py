"""SVMClassifier's probabilities (``prob_a``/``prob_b``, scikit-learn's SVC(probability=True)):
Platt's sigmoid of each pairwise decision value, coupled into class probabilities by
libsvm's ``multiclass_probability`` (Wu, Lin and Weng 2004), for every row at once.

The coupling iterates until a row's error is below 0.005 / k (at most max(100, k)
passes); rows that have converged stop changing while the others go on, so each row
gets the passes it would get alone. Q is libsvm's (Q[t][j] = -r[j][t] r[t][j]), as
onnxruntime builds it; onnx.reference fills each row's off-diagonal with one dot product
instead, which changes the result from three classes on (two agree), so the tests compare
three or more classes with onnxruntime only.
"""

from __future__ import annotations

import numpy as np

from graphexec.kernels.ml_common import logistic

CLIP = 1.0e-7   # a pairwise probability is kept in [CLIP, 1 - CLIP]


def pairwise(scores: np.ndarray, prob_a: np.ndarray, prob_b: np.ndarray, k: int) -> np.ndarray:
    """r (rows, k, k): r[i][j] = P(i | i or j) from the decision values ``scores`` (rows, pairs)
    of pairs (i < j) in order, r[j][i] = 1 - r[i][j]."""
    val = 1 - logistic(scores * prob_a + prob_b)
    np.clip(val, CLIP, 1 - CLIP, out=val)
    r = np.zeros((len(scores), k, k), scores.dtype)
    i, j = np.triu_indices(k, 1)
    r[:, i, j] = val
    r[:, j, i] = 1 - val
    return r


def couple(r: np.ndarray) -> np.ndarray:
    """Class probabilities (rows, k) from pairwise ones r (rows, k, k), libsvm's iteration."""
    n, k = r.shape[:2]
    dt = r.dtype.type
    q = -r.transpose(0, 2, 1) * r                          # Q[t][j] = -r[j][t] r[t][j]
    diag = (r.transpose(0, 2, 1) ** 2).sum(axis=2) - (np.diagonal(r, axis1=1, axis2=2) ** 2)
    idx = np.arange(k)
    q[:, idx, idx] = diag                                  # Q[t][t] = sum over j != t of r[j][t]^2
    p = np.full((n, k), dt(1.0 / k), r.dtype)
    active = np.arange(n)
    eps = dt(0.005 / k)
    for _ in range(max(100, k)):
        qa, pa = q[active], p[active]
        qp = np.einsum("ntj,nj->nt", qa, pa)
        pqp = (pa * qp).sum(axis=1)
        going = np.abs(qp - pqp[:, None]).max(axis=1) >= eps
        if not going.any():
            break
        active, qa, pa, qp, pqp = active[going], qa[going], pa[going], qp[going], pqp[going]
        for t in range(k):
            qtt = qa[:, t, t]
            diff = (-qp[:, t] + pqp) / qtt
            pa[:, t] += diff
            pqp = (pqp + diff * (diff * qtt + 2 * qp[:, t])) / (1 + diff) ** 2
            pa /= (1 + diff)[:, None]
            qp = (qp + diff[:, None] * qa[:, t, :]) / (1 + diff)[:, None]
        p[active] = pa
    return p
