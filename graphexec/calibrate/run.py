"""One calibration: split the rows, fit the free parameters on the training rows, report
the error before and after per kind, in-sample and on the held-out rows, and build the
fitted profile with a ``fitted: ...`` source for every number it moved.

Held-out rows (deterministic, documented): within each kind (model, collective), in the
order the tables list them, every ``holdout_every``-th row (the 5th, 10th, ... by default)
is held out; 0 holds none out. The fit never sees them; their error is the out-of-sample one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from graphexec.calibrate.fit import Fit, levenberg_marquardt
from graphexec.calibrate.params import Param, Target
from graphexec.calibrate.predict import simulate_all
from graphexec.calibrate.tables import Measurement
from graphexec.errors import CalibrationError

HOLDOUT_EVERY = 5


@dataclass(frozen=True)
class Row:
    """A measured row with its simulated/measured ratio before and after the fit."""

    m: Measurement
    held_out: bool
    before: float
    after: float


@dataclass
class Calibration:
    """What ``calibrate`` found: the fitted values, each row's ratios, the new profile."""

    target: str
    params: list[Param]
    fitted: dict[str, float]
    rows: list[Row]
    profile: Any
    iterations: int
    ignored: int = 0
    spread: dict[str, float] = field(default_factory=dict)   # path -> 1-sigma relative uncertainty
    jacobian: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))   # at the start, training rows
    notes: list[str] = field(default_factory=list)

    def summary(self) -> dict[str, dict[str, dict[str, float]]]:
        """Per kind, per split ("train", "held_out"): rows, geomean error and share within 25%."""
        out: dict[str, dict[str, dict[str, float]]] = {}
        for kind in dict.fromkeys(r.m.kind for r in self.rows):
            for split, held in (("train", False), ("held_out", True)):
                rs = [r for r in self.rows if r.m.kind == kind and r.held_out == held]
                if rs:
                    out.setdefault(kind, {})[split] = {
                        "rows": len(rs), "error_before": error([r.before for r in rs]),
                        "error_after": error([r.after for r in rs]),
                        "within_25pct_before": within(r.before for r in rs),
                        "within_25pct_after": within(r.after for r in rs)}
        return out


def error(ratios: Sequence[float]) -> float:
    """Geomean error exp(mean |ln r|): 1.0 when every row is exact (benchmarks/fidelity.py's)."""
    return math.exp(sum(abs(math.log(r)) for r in ratios) / len(ratios)) if ratios else float("nan")


def within(ratios: Any) -> float:
    rs = list(ratios)
    return float(sum(0.8 <= r <= 1.25 for r in rs) / len(rs)) if rs else float("nan")


def held_out(measurements: Sequence[Measurement], every: int = HOLDOUT_EVERY) -> list[bool]:
    """Which rows are held out: every ``every``-th row of each kind, in table order."""
    seen: dict[str, int] = {}
    flags = []
    for m in measurements:
        seen[m.kind] = seen.get(m.kind, 0) + 1
        flags.append(every > 0 and seen[m.kind] % every == 0)
    return flags


def applicable(target: Target, measurements: Sequence[Measurement],
               rows_device: str | None = None) -> tuple[list[Measurement], int]:
    """The rows measured on the target (model rows name its device, or ``rows_device`` for a
    profile of another name, or the system itself; collectives need a system)."""
    device = (rows_device or target.device_profile.name).lower()
    keep = [m for m in measurements if (m.kind in ("model", "op") and m.device == device)
            or (m.kind == "model" and target.kind == "system" and m.device == target.name)
            or (m.kind == "collective" and target.kind == "system")]
    return keep, len(measurements) - len(keep)


def calibrate(target: Target, measurements: Sequence[Measurement], fit: Mapping[str, tuple[float, float] | None],
              holdout_every: int = HOLDOUT_EVERY, name: str | None = None,
              rows_device: str | None = None) -> Calibration:
    """Fit ``fit``'s paths (each with optional bounds) of ``target`` to ``measurements``
    (``rows_device``: the device the model rows name, when not the profile's own name)."""
    rows, ignored = applicable(target, measurements, rows_device)
    if not rows:
        raise CalibrationError(f"calibrate: no measurement row was taken on '{target.name}' "
                               f"({ignored} rows name other devices, or collectives need a system)")
    if not fit:
        raise CalibrationError("calibrate: name at least one parameter to fit (a profile field path)")
    params = [target.param(path, bounds) for path, bounds in fit.items()]
    flags = held_out(rows, holdout_every)
    train = np.array([not h for h in flags])

    def times(x: np.ndarray) -> np.ndarray:   # every row: the ops of one run are joined to tasks together
        profile = target.build({p.path: math.exp(v) for p, v in zip(params, x)})
        return np.array(simulate_all(rows, profile))

    measured = np.array([m.measured_us for m in rows])
    result: Fit = levenberg_marquardt(lambda x: np.log(times(x)[train] / measured[train]), params)
    x0 = np.array([math.log(p.start) for p in params])
    before, after = times(x0), times(result.x)
    fitted = {p.path: _rounded(p, math.exp(v)) for p, v in zip(params, result.x)}
    out = [Row(m, h, b / m.measured_us, a / m.measured_us) for m, h, b, a in zip(rows, flags, before, after)]
    cal = Calibration(target.name, params, fitted, out, None, result.iterations, ignored,
                      {p.path: float(math.expm1(s)) for p, s in zip(params, result.spread)}, result.jacobian)
    cal.profile = target.build(fitted, _sources(target, cal)) if name is None else \
        _renamed(target, fitted, _sources(target, cal), name)
    return cal


def _rounded(p: Param, value: float) -> float:
    return float(round(value)) if p.integer else float(f"{value:.4g}")


def _renamed(target: Target, fitted: dict[str, float], sources: dict[str, str], name: str) -> Any:
    saved = target.data["name"]
    target.data["name"] = name
    try:
        return target.build(fitted, sources)
    finally:
        target.data["name"] = saved


def _rows_text(rows: Sequence[Row]) -> str:
    """'FILE rows 2,3,5; FILE2 lines 10,11' for the rows given."""
    by_file: dict[str, list[str]] = {}
    for r in rows:
        file, _, what = r.m.where.rpartition(" ")
        head, _, noun = file.rpartition(" ")
        by_file.setdefault(f"{head} {noun}s", []).append(what)
    return "; ".join(f"{k} {','.join(v)}" for k, v in by_file.items())


def _sources(target: Target, cal: Calibration) -> dict[str, str]:
    train = [r for r in cal.rows if not r.held_out]
    held = [r for r in cal.rows if r.held_out]
    e_in = f"geomean error {error([r.before for r in train]):.3f}x -> {error([r.after for r in train]):.3f}x"
    e_out = (f"; held out {_rows_text(held)}: {error([r.before for r in held]):.3f}x -> "
             f"{error([r.after for r in held]):.3f}x" if held else "")
    return {p.path: f"fitted: {_rows_text(train)} ({len(train)} rows, {e_in}{e_out}) by graphexec calibrate, "
                    f"with {', '.join(q.path for q in cal.params)} free{_plus_minus(cal.spread.get(p.path))}; "
                    f"before: {p.start:g}"
            for p in cal.params}


def _plus_minus(s: float | None) -> str:
    return "" if s is None or math.isnan(s) else f", +-{100 * s:.2g}% (1 sigma of the residuals)"
