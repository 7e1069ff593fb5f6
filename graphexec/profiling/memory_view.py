"""What the report's memory section shows of a run with a memory plan: the pool reserved,
the peak of bytes in use with the tensors live at it, and the bytes each op allocates.

A tensor holds its bytes from the start of the task that first writes it to the end of
its last reader (``counters.live_spans``, the executed live peak's rule), so the peak is
the highest level of the pool's in-use counter and the tensors live at it are those whose
span holds that instant. An op allocates the activation tensors it writes first.

An eager run has no plan: its caching allocator's blocks (``DeviceRun.memory``, each with
the launch it was taken for) give the same summary, with the peak the highest sum of
blocks held and the allocator's (allocated, reserved) samples for the chart.
"""

from __future__ import annotations

from typing import Any

from graphexec.profiling.counters import live_spans, steps

TOP = 20


def memory_summary(record: Any) -> dict[str, Any] | None:
    """JSON-ready summary for ``otherData.memory`` (None for a run with no plan)."""
    plan = getattr(record, "plan", None)
    if plan is None:
        eager = getattr(record, "memory", None)
        return eager_summary(*eager) if eager and eager[0] else None
    sizes = record.activation_sizes()
    span = live_spans(record.tasks, sizes, plan.tasks.root)
    series = steps([(s[0], sizes[n]) for (n, _), s in span.items()]
                   + [(s[1], -sizes[n]) for (n, _), s in span.items()])
    at, peak = max(series, key=lambda p: (p[1], -p[0]), default=(0.0, 0.0))
    live = sorted(((n, sizes[n], s[2].name) for (n, _), s in span.items() if s[0] <= at < s[1]),
                  key=lambda x: -x[1])
    per_op: dict[str, list[Any]] = {}
    for (n, _), s in span.items():
        task = s[2].meta.get("task")
        entry = per_op.setdefault(s[2].name, [s[2].name, getattr(task, "op", ""), 0, 0])
        entry[2] += sizes[n]
        entry[3] += 1
    ops = sorted(per_op.values(), key=lambda e: (-e[2], e[0]))
    reserved = int(plan.memory_plan.region_bytes.get("activation", 0))
    return {"reserved_bytes": reserved, "peak_us": float(at), "peak_bytes": int(peak),
            "live_count": len(live), "live": [[n, int(b), op] for n, b, op in live[:TOP]],
            "per_op": [[name, op, int(b), k] for name, op, b, k in ops[:TOP]], "ops_allocating": len(ops)}


def eager_summary(blocks: list[Any], samples: list[Any]) -> dict[str, Any]:
    """The summary of an eager card's blocks ``(taken, given back, bytes, op, type, shape,
    dtype)`` (indices into ``samples``: (host us, allocated, reserved) after each event)."""
    level, best, at = 0, -1, 0
    for i, d in sorted([(b[0], b[2]) for b in blocks] + [(b[1], -b[2]) for b in blocks if b[1] < len(samples)]):
        level += d
        if level > best and d > 0:
            best, at = level, i
    live = sorted(((f"{b[3]} out {b[5]} {b[6]}".strip(), b[2], b[3]) for b in blocks if b[0] <= at < b[1]),
                  key=lambda x: -x[1])
    per_op: dict[str, list[Any]] = {}
    for b in blocks:
        entry = per_op.setdefault(b[3], [b[3], b[4], 0, 0])
        entry[2] += b[2]
        entry[3] += 1
    ops = sorted(per_op.values(), key=lambda e: (-e[2], e[0]))
    return {"reserved_bytes": int(samples[at][2]), "peak_us": float(samples[at][0]), "peak_bytes": int(best),
            "live_count": len(live), "live": [[n, int(b), op] for n, b, op in live[:TOP]],
            "per_op": [[name, op, int(b), k] for name, op, b, k in ops[:TOP]], "ops_allocating": len(ops),
            "eager": True, "samples": [[float(t), int(a), int(r)] for t, a, r in samples]}
