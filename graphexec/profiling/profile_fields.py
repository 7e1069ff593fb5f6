"""The device-profile fields a cause rests on, with their values and where they come from.

Every number of a profile has an entry in its ``sources:`` (measured, fitted from named
measurements, or an assumption); a cause names the fields that set its bound so a reader
can see whether it rests on a measurement or a guess, and which line to change.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from graphexec.runtime.kernel_time import op_class

# the fields each cause's bound is set by (a compute cause adds its unit and dtype's own)
FIELDS: dict[str, tuple[str, ...]] = {
    "dependency": ("ai_cores",),
    "launch": ("launch_cost_us",),
    "dispatch": ("task_overhead_us",),
    "memory": ("hbm_bandwidth_gbps", "kernels.l2_bandwidth_gbps", "kernels.l2_bytes"),
    "compute": (),
    "host": ("queue_depth", "max_tasks_per_stream"),
}


def lookup(profile: Any, path: str) -> Any:
    """The value at a dotted path of the profile (attributes and mapping keys), or None."""
    value = profile
    for part in path.split("."):
        if isinstance(value, dict):
            value = value.get(part)
        else:
            value = getattr(value, part, None)
        if value is None:
            return None
    return value


def _plain(value: Any) -> Any:
    if hasattr(value, "model_dump"):
        value = value.model_dump()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return float(value) if isinstance(value, float) else value


def source(profile: Any, path: str) -> str:
    """The profile's ``sources:`` line for ``path``, or those of the fields under it."""
    sources: dict[str, str] = getattr(profile, "sources", None) or {}
    if path in sources:
        return sources[path]
    under = [f"{k[len(path) + 1:]}: {v}" for k, v in sorted(sources.items()) if k.startswith(path + ".")]
    return "; ".join(under) or "no source given"


def named(profile: Any, path: str) -> dict[str, Any] | None:
    """{"field", "value", "source"} of one profile field (None when the profile has no such field)."""
    value = lookup(profile, path)
    if value is None:
        return None
    return {"field": path, "value": _plain(value), "source": source(profile, path)}


def compute_fields(tasks: list[Any], profile: Any) -> tuple[str, ...]:
    """The peak rate and efficiency of the unit and dtype that ran the most kernel time (the AI
    CPU's rate and cores when it ran the most)."""
    time: Counter[tuple[str, str, str]] = Counter()
    lone: Counter[tuple[str, str, str]] = Counter()   # of it, kernels whose blocks ran one item each
    for t in tasks:
        if t.kind in ("kernel", "aicpu") and t.start_t is not None and t.unit in ("cube", "vector", "aicpu"):
            key = (t.unit, str(t.dtype), op_class(t.meta))
            time[key] += t.end_t - t.start_t
            lone[key] += (t.end_t - t.start_t) * _one_item_per_block(t, profile)
    if not time:
        return ("peak_tflops",)
    unit, dtype, op = max(time, key=lambda k: (time[k], k))
    if unit == "aicpu":   # float32 cube work on a chip without a float32 cube path, or ops with no AI-core kernel
        return ("aicpu_gflops_per_core", "aicpu_cores")
    per_op = f"kernels.{unit}.op_efficiency.{op}"   # where the profile gives the op class its own
    efficiency = per_op if op and lookup(profile, per_op) is not None else f"kernels.{unit}.efficiency"
    paths = (f"peak_tflops.{unit}.{dtype}", efficiency)
    return paths + (f"kernels.{unit}.lone_efficiency",) if 2 * lone[unit, dtype, op] > time[unit, dtype, op] else paths


def _one_item_per_block(t: Any, profile: Any) -> bool:
    """Whether a kernel's blocks each ran one work item (so ``lone_efficiency`` timed it)."""
    km = getattr(profile, "kernels", None)
    if km is None or t.unit not in ("cube", "vector"):
        return False
    return -(-max(t.block_dim, 1) // getattr(km, t.unit).split) <= profile.unit_cores(t.unit)


def cause_fields(reason: str, profile: Any, tasks: list[Any]) -> list[dict[str, Any]]:
    """The named fields (value and source) a cause's bound rests on."""
    paths = FIELDS[reason] + (compute_fields(tasks, profile) if reason == "compute" else ())
    return [f for f in (named(profile, p) for p in paths) if f is not None]


def describe(fields: list[dict[str, Any]]) -> str:
    """``name = value (source)``, joined, for a message."""
    return "; ".join(f"{f['field']} = {_short(f['value'])} ({f['source']})" for f in fields)


def _short(value: Any) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_short(v)}" for k, v in value.items()) + "}"
    return f"{value:g}" if isinstance(value, float) else str(value)
