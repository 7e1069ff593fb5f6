"""Fit a profile's free parameters to measured times: Levenberg-Marquardt on log ratios.

The residual of a row is ln(simulated / measured); the parameters move in log space
(x = ln value), inside their bounds, so a fit is scale-free and a fraction stays a
fraction. The Jacobian is taken by forward differences of ``STEP`` in ln value, each a
full re-simulation of the training rows: no gradient of the simulator is assumed, only
that it responds to a parameter.

Whether the data can pin the parameters (``check_identifiable``), before any fit:
- rows: at least ``ROWS_PER_PARAM`` training rows per free parameter;
- sensitivity: each parameter must move some training row's log time by at least
  ``MIN_SENSITIVITY`` per unit of its log (a 1% change moving no row by 0.05% is not seen);
- separation: the Jacobian with unit columns must have a condition number below
  ``MAX_CONDITION``; otherwise the parameters that carry the weakest direction (a weight of
  at least 0.3 in its right singular vector) trade off against each other and are named.
The refusal is one line naming those parameters.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from graphexec.calibrate.params import Param
from graphexec.errors import CalibrationError

STEP = 0.02
ROWS_PER_PARAM = 3
MIN_SENSITIVITY = 0.05
MAX_CONDITION = 1e3
MAX_ITERATIONS = 30

Residuals = Callable[[np.ndarray], np.ndarray]   # ln values -> ln(simulated / measured) per row


@dataclass(frozen=True)
class Fit:
    """The fitted ln values, the iterations it took, the Jacobian at the start, and each
    parameter's 1-sigma spread in ln value (about its relative uncertainty) at the fit."""

    x: np.ndarray
    iterations: int
    jacobian: np.ndarray
    spread: np.ndarray


def jacobian(residuals: Residuals, x: np.ndarray, r0: np.ndarray, params: Sequence[Param]) -> np.ndarray:
    """d residual / d ln value by forward differences (backward where the upper bound is near)."""
    cols = []
    for j, p in enumerate(params):
        h = STEP if x[j] + STEP <= math.log(p.upper) else -STEP
        if p.integer:   # an integer moves by at least one
            h = math.copysign(max(abs(h), math.log1p(1.0 / max(math.exp(x[j]), 1.0))), h)
        xh = x.copy()
        xh[j] += h
        cols.append((residuals(xh) - r0) / h)
    return np.stack(cols, axis=1) if cols else np.zeros((len(r0), 0))


def conditioning(jac: np.ndarray) -> tuple[float, float]:
    """(condition number of the Jacobian with unit columns, the least of the parameters'
    largest sensitivities): what ``check_identifiable`` judges, for the report."""
    if jac.shape[1] == 0:
        return 1.0, 0.0
    least = float(np.min(np.max(np.abs(jac), axis=0)))
    norms = np.linalg.norm(jac, axis=0)
    if not np.all(norms > 0):
        return float("inf"), least
    s = np.linalg.svd(jac / norms, compute_uv=False)
    return float(s[0] / s[-1]) if s[-1] > 0 else float("inf"), least


def check_identifiable(jac: np.ndarray, params: Sequence[Param]) -> None:
    """Refuse (one line) when the training rows cannot pin these parameters."""
    n, k = jac.shape
    names = [p.path for p in params]
    if n < ROWS_PER_PARAM * k:
        raise CalibrationError(f"calibrate: {n} training rows cannot pin {k} parameters (at least {ROWS_PER_PARAM} "
                               f"rows per parameter): {', '.join(names)}")
    blind = [names[j] for j in range(k) if np.max(np.abs(jac[:, j]), initial=0.0) < MIN_SENSITIVITY]
    if blind:
        raise CalibrationError(f"calibrate: no training row depends on {', '.join(blind)} (a 1% change moves "
                               f"no simulated time by {MIN_SENSITIVITY:g}%); drop it or add rows that exercise it")
    unit = jac / np.linalg.norm(jac, axis=0)
    _, s, vt = np.linalg.svd(unit, full_matrices=False)
    if k > 1 and s[-1] * MAX_CONDITION < s[0]:
        weak = [names[j] for j in range(k) if abs(vt[-1, j]) >= 0.3]
        raise CalibrationError(f"calibrate: the training rows cannot tell apart {', '.join(weak)} (they move the "
                               f"simulated times alike; condition number {s[0] / s[-1]:.3g} > {MAX_CONDITION:g}); "
                               "fit fewer of them or add rows that separate them")


def levenberg_marquardt(residuals: Residuals, params: Sequence[Param], check: bool = True) -> Fit:
    """Minimise the sum of squared log ratios within the bounds; deterministic."""
    lo = np.array([math.log(p.lower) for p in params])
    hi = np.array([math.log(p.upper) for p in params])
    x = np.array([math.log(p.start) for p in params])
    r = residuals(x)
    jac0 = jac = jacobian(residuals, x, r, params)
    if check:
        check_identifiable(jac, params)
    cost, damping, iterations = float(r @ r), 1e-3, 0
    for iterations in range(1, MAX_ITERATIONS + 1):  # noqa: B007 (the count is returned)
        g, h = jac.T @ r, jac.T @ jac
        improved = False
        while damping < 1e8:
            step = np.linalg.solve(h + damping * np.diag(np.diag(h) + 1e-12), -g)
            x_new = np.clip(x + step, lo, hi)
            r_new = residuals(x_new)
            cost_new = float(r_new @ r_new)
            if cost_new < cost:
                improved = True
                break
            damping *= 10
        if not improved:
            break
        done = cost - cost_new < 1e-10 * max(cost, 1e-30) or np.max(np.abs(x_new - x)) < 1e-6
        x, r, cost, damping = x_new, r_new, cost_new, max(damping / 10, 1e-9)
        jac = jacobian(residuals, x, r, params)
        if done:
            break
    return Fit(x, iterations, jac0, spread(jac, r))


def spread(jac: np.ndarray, r: np.ndarray) -> np.ndarray:
    """1-sigma of each ln parameter from the residuals left: s^2 (J^T J)^-1 with s^2 their
    variance over n - k degrees of freedom (nan with no degree of freedom left)."""
    n, k = jac.shape
    if n <= k:
        return np.full(k, np.nan)
    cov = float(r @ r) / (n - k) * np.linalg.pinv(jac.T @ jac)
    return np.sqrt(np.maximum(np.diag(cov), 0.0))
