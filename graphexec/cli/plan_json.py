"""``graphexec plan MODEL --json``: the compiled plan as data, in the CLI's one vocabulary
(``cli/jsonout.py``): each stream's tasks in order (kernels with their unit and blocks,
event records and waits with their event ids), the fusion groups, and the memory plan
(every tensor's region, offset, size, lifetime in launch order and the buffer it aliases)."""

from __future__ import annotations

from typing import Any

from graphexec.plan.tasks import TaskKind


def _task(t: Any) -> dict[str, Any]:
    if t.kind in (TaskKind.EVENT_RECORD, TaskKind.EVENT_WAIT):
        return {"name": t.name, "kind": "record" if t.kind is TaskKind.EVENT_RECORD else "wait", "event": t.event}
    fused = t.node.meta.get("fused_ops") if t.node is not None else None
    return {"name": t.name, "kind": t.kind.value, "op": t.op, "unit": t.unit, "block_dim": int(t.block_dim),
            "fused_ops": list(fused) if fused else []}


def plan_doc(model: str, device: str, compiled: Any) -> dict[str, Any]:
    """The body of ``plan --json`` for one card."""
    sched, memory = compiled.schedule, compiled.memory_plan
    return {"model": model, "device": device, "policy": sched.policy, "num_streams": len(sched.streams),
            "num_events": int(sched.num_events), "fusion": dict(compiled.graph.meta.get("fusion") or {}),
            "stream_tasks": [{"stream": i, "tasks": [_task(t) for t in tasks]}
                             for i, tasks in enumerate(sched.streams)],
            "memory": {"peak_bytes": int(memory.region_bytes["activation"]),
                       "weight_bytes": int(memory.region_bytes["weight"]), "io_bytes": int(memory.region_bytes["io"]),
                       "lower_bound_bytes": int(memory.lower_bound_bytes),
                       "no_reuse_bytes": int(memory.no_reuse_bytes),
                       "entries": [{"tensor": e.tensor, "region": e.region, "offset": int(e.offset),
                                    "size": int(e.size), "first": int(e.first), "last": int(e.last),
                                    "alias_of": e.alias_of} for e in memory.entries]}}
