"""What the report's memory section shows of a run with a memory plan: the pool reserved,
the peak of bytes in use with the tensors live at it, and the bytes each op allocates.

A tensor holds its bytes from the start of the task that first writes it to the end of
its last reader (``counters.live_spans``, the executed live peak's rule), so the peak is
the highest level of the pool's in-use counter and the tensors live at it are those whose
span holds that instant. An op allocates the activation tensors it writes first.
"""

from __future__ import annotations

from typing import Any

from graphexec.profiling.counters import live_spans, steps

TOP = 20


def memory_summary(record: Any) -> dict[str, Any] | None:
    """JSON-ready summary for ``otherData.memory`` (None for a run with no plan)."""
    plan = getattr(record, "plan", None)
    if plan is None:
        return None
    sizes = record.activation_sizes()
    span = live_spans(record.tasks, sizes, plan.tasks.root)
    series = steps([(s[0], sizes[n]) for n, s in span.items()] + [(s[1], -sizes[n]) for n, s in span.items()])
    at, peak = max(series, key=lambda p: (p[1], -p[0]), default=(0.0, 0.0))
    live = sorted(((n, sizes[n], s[2].name) for n, s in span.items() if s[0] <= at < s[1]), key=lambda x: -x[1])
    per_op: dict[str, list[Any]] = {}
    for n, s in span.items():
        task = s[2].meta.get("task")
        entry = per_op.setdefault(s[2].name, [s[2].name, getattr(task, "op", ""), 0, 0])
        entry[2] += sizes[n]
        entry[3] += 1
    ops = sorted(per_op.values(), key=lambda e: (-e[2], e[0]))
    reserved = int(plan.memory_plan.region_bytes.get("activation", 0))
    return {"reserved_bytes": reserved, "peak_us": float(at), "peak_bytes": int(peak),
            "live_count": len(live), "live": [[n, int(b), op] for n, b, op in live[:TOP]],
            "per_op": [[name, op, int(b), k] for name, op, b, k in ops[:TOP]], "ops_allocating": len(ops)}
