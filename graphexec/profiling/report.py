"""Readable text of a compiled plan: each stream's task order, and the memory plan."""

from __future__ import annotations

from typing import Any

from graphexec._render import term
from graphexec.plan.tasks import TaskKind


def schedule_text(compiled: Any, limit: int = 0) -> str:
    """Each stream's tasks in order, records and waits shown with their event ids."""
    sched = compiled.schedule
    lines = [f"schedule: policy {sched.policy}, {len(sched.streams)} stream(s), {sched.num_events} wait(s) "
             f"after pruning ({sched.stats.get('waits_before_pruning', 0)} cross-stream dependencies), "
             f"{sched.num_event_ids} event id(s)"]
    fusion = compiled.graph.meta.get("fusion")
    if fusion:   # graph fusion's groups by GE rule (passes/graph_fusion.py)
        lines.append("fusion: " + ", ".join(f"{term(rule)} x{n}" for rule, n in fusion.items()))
    for i, tasks in enumerate(sched.streams):
        lines.append(f"stream {i}: {sum(t.kind in (TaskKind.KERNEL, TaskKind.AICPU) for t in tasks)} kernels")
        shown = tasks if not limit else tasks[:limit]
        for t in shown:
            if t.kind is TaskKind.EVENT_RECORD:
                lines.append(f"    record e{t.event}    ({term(t.name)})")
            elif t.kind is TaskKind.EVENT_WAIT:
                lines.append(f"    wait   e{t.event}    ({term(t.name)})")
            else:
                where = "AI CPU" if t.kind is TaskKind.AICPU else f"{t.unit}, {t.block_dim} blocks"
                fused = t.node.meta.get("fused_ops") if t.node is not None else None
                op = f"{t.op}, fused: {'+'.join(fused)}" if fused else t.op
                lines.append(f"  {term(t.name)} [{term(op)}] ({where})")
        if len(shown) < len(tasks):
            lines.append(f"  ... {len(tasks) - len(shown)} more")
    return "\n".join(lines)


def memory_text(plan: Any, limit: int = 0) -> str:
    """The memory plan: region sizes, then each activation's offset, size and lifetime."""
    r = plan.region_bytes
    lines = [f"memory: activation pool {r['activation']:,} bytes (live peak in launch order "
             f"{plan.lower_bound_bytes:,}, without reuse {plan.no_reuse_bytes:,}), weights {r['weight']:,}, "
             f"inputs/outputs {r['io']:,}"]
    acts = sorted((e for e in plan.buffers if e.region == "activation"), key=lambda e: (e.offset, e.first))
    shown = acts if not limit else acts[:limit]
    lines.append(f"  {'offset':>12} {'size':>12}  {'stream':>6}  {'live (launch idx)':>17}  tensor")
    for e in shown:
        lines.append(f"  {e.offset:>12,} {e.size:>12,}  {e.stream:>6}  {f'{e.first}..{e.last}':>17}  {term(e.tensor)}")
    if len(shown) < len(acts):
        lines.append(f"  ... {len(acts) - len(shown)} more")
    return "\n".join(lines)
