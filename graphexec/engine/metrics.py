"""Measurements of one executed run, from the device's finished tasks."""

from __future__ import annotations

from typing import Any, TypedDict


class Utilization(TypedDict):
    """What :func:`utilization` returns (Stats fields of the same names)."""

    cube_utilization: float
    vector_utilization: float
    hbm_utilization: float


def utilization(done: list[Any], profile: Any, makespan: float) -> Utilization:
    """Achieved share of peak: cube and vector flops, HBM bytes, over the makespan."""
    if makespan <= 0:
        return {"cube_utilization": 0.0, "vector_utilization": 0.0, "hbm_utilization": 0.0}
    cube = vector = moved = 0.0
    for t in done:
        if t.kind != "kernel":
            continue
        moved += t.bytes
        if t.unit == "cube":
            cube += t.flops / (profile.unit_rate("cube", t.dtype) * profile.ai_cores)
        elif t.unit == "vector":
            vector += t.flops / (profile.unit_rate("vector", t.dtype) * profile.vector_cores)
    return {"cube_utilization": cube / makespan, "vector_utilization": vector / makespan,
            "hbm_utilization": moved / (profile.hbm_bytes_per_us * makespan)}


def executed_live_peak(done: list[Any], sizes: dict[str, int], root: Any) -> int:
    """Most activation bytes live at once as executed: a tensor lives from the start of
    its writer to the end of its last reader."""
    span: dict[str, list[float]] = {}
    for t in done:
        task = t.meta.get("task")
        if task is None or t.kind != "kernel":
            continue
        for name in map(root, task.writes):
            if name in sizes:
                s = span.setdefault(name, [t.start_t, t.end_t])
                s[0] = min(s[0], t.start_t)
                s[1] = max(s[1], t.end_t)
        for name in map(root, task.reads):
            if name in span:
                span[name][1] = max(span[name][1], t.end_t)
    points = sorted([(s, 1, n) for n, (s, _) in span.items()] + [(e, 0, n) for n, (_, e) in span.items()])
    live = peak = 0
    for _, kind, name in points:  # at equal times ends (0) come before starts (1)
        live += sizes[name] if kind else -sizes[name]
        peak = max(peak, live)
    return peak
