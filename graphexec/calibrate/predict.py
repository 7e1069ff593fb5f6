"""What graphexec says a measured row takes, on a given profile: a whole model by a
timing-only simulation (``Session.simulate``), a collective by the collective model the
simulated runs use (``hccl.collective_us``), an op by its kernel's duration in a timing-only
run of its model (joined as ``--measured`` joins ops to tasks: ``passes/measured.match``).
Graphs are loaded once per file; the ops of one run share one simulation."""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any, Sequence

from graphexec.api import Session
from graphexec.calibrate.tables import Measurement
from graphexec.errors import CalibrationError
from graphexec.frontend import load
from graphexec.hccl import collective_us
from graphexec.passes.measured import match
from graphexec.plan import MeasuredOp, MeasuredTimes
from graphexec.runtime.profiles import DeviceProfile
from graphexec.runtime.systems import SystemProfile


@lru_cache(maxsize=16)
def _graph(path: str) -> Any:
    return load(path)


def _device(profile: DeviceProfile | SystemProfile) -> DeviceProfile:
    return profile.device_profile if isinstance(profile, SystemProfile) else profile


def simulated_us(m: Measurement, profile: DeviceProfile | SystemProfile) -> float:
    """The simulated time of row ``m`` on ``profile`` (a system's rows run on its cards)."""
    if m.kind == "op":
        return simulate_all([m], profile)[0]
    if m.kind == "collective":
        if not isinstance(profile, SystemProfile):
            raise CalibrationError(f"{m.where}: a collective row needs a system profile to run on")
        if m.ranks > profile.count:
            raise CalibrationError(f"{m.where}: {m.ranks} ranks, but system '{profile.name}' has {profile.count} cards")
        return collective_us(m.collective, float(m.nbytes), profile, list(range(m.ranks)), m.dtype)
    if m.cards > 1:
        if not isinstance(profile, SystemProfile):
            raise CalibrationError(f"{m.where}: a run on {m.cards} cards needs a system profile to run on")
        session = Session(_graph(m.model), streams=m.streams, devices=m.cards, parallel=m.parallel, system=profile)
    else:
        session = Session(_graph(m.model), streams=m.streams, device=_device(profile))
    return float(session.simulate(shapes=dict(m.shapes)).stats.makespan_us)


def _op_times(rows: Sequence[Measurement], device: DeviceProfile) -> list[float]:
    """The simulated durations of op rows measured in one run (one model, shapes, streams)."""
    first = rows[0]
    session = Session(_graph(first.model), streams=first.streams, device=device)
    result = session.simulate(shapes=dict(first.shapes))
    dur: dict[str, float] = {}
    for e in result.trace["traceEvents"]:
        if e.get("ph") == "X" and e.get("cat") == "kernel":
            dur[e["name"]] = dur.get(e["name"], 0.0) + float(e["dur"])
    plan = session.compiled.plan
    ops = [MeasuredOp(*m.op, m.measured_us) for m in rows]
    names = {t.id: t.name for t in plan.tasks.tasks}
    found = {id(op): dur.get(names[tid], math.nan) for tid, op in match(plan.graph, plan.tasks,
                                                                         MeasuredTimes(tuple(ops), "")).items()}
    out = []
    for m, op in zip(rows, ops):
        if id(op) not in found or math.isnan(found[id(op)]):
            raise CalibrationError(f"{m.where}: op {m.op[0]!r} ({m.op[1]}) matches no kernel of "
                                   f"{first.model} at these shapes")
        out.append(found[id(op)])
    return out


def simulate_all(rows: Sequence[Measurement], profile: DeviceProfile | SystemProfile) -> list[float]:
    """``simulated_us`` of every row, the op rows of one run from one simulation."""
    out: list[float] = [math.nan] * len(rows)
    runs: dict[tuple[Any, ...], list[int]] = {}
    for i, m in enumerate(rows):
        if m.kind == "op":
            runs.setdefault((m.model, m.shapes, m.streams, m.source), []).append(i)
        else:
            out[i] = simulated_us(m, profile)
    for idx in runs.values():
        for i, t in zip(idx, _op_times([rows[i] for i in idx], _device(profile))):
            out[i] = t
    return out
