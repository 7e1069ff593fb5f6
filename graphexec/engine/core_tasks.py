"""A compiled plan's launch order as the compiled event loop reads it (``runtime/sim_core.py``)."""

from __future__ import annotations

from typing import Any, Mapping

from graphexec.plan import Schedule, TaskKind
from graphexec.runtime.sim_core import KERNEL, RECORD, WAIT, GraphTasks

_KINDS = {TaskKind.KERNEL: KERNEL, TaskKind.AICPU: KERNEL, TaskKind.EVENT_RECORD: RECORD, TaskKind.EVENT_WAIT: WAIT}


def graph_tasks(schedule: Schedule, metas: Mapping[int, Any]) -> GraphTasks | None:
    """The plan's tasks in launch order, each as ``launch_all`` would launch it; None for a
    plan with control flow (its switches launch bodies: the Python loop runs those)."""
    entries = []
    stream_of = schedule.stream_of
    for task in schedule.order:
        kind = _KINDS.get(task.kind)
        if kind is None:
            return None
        if kind == KERNEL:
            entries.append((KERNEL, stream_of[task.id], task.name, task.unit, task.block_dim, task.flops,  # type: ignore[union-attr]
                            task.bytes, task.dtype, metas[task.id], -1))  # type: ignore[union-attr]
        else:
            entries.append((kind, task.stream, "", "", 1, 0.0, 0.0, "float16", task, task.event))  # type: ignore[union-attr]
    return GraphTasks(entries)
