"""Which kernel tasks may compute straight into their output bytes.

A kernel reads its inputs when it starts and writes its outputs when it ends, so the
numbers follow simulated time. Computing into the output's device bytes at the start
instead (numpy's ``out=``) saves a scratch array and a copy, and nobody can tell the
difference as long as no task reads those bytes between the start and the end. Other
tensors that share the bytes are already ordered by the memory plan (one's last use
happens before the other's first write), so what is left to check is the readers of
the same bytes: every one of them must be ordered after the task, or before it (the
earlier values of an in-place chain), by the schedule (stream order or events); an
in-place task's own read of the input it overwrites is fine, since it reads each
element before writing it. A schedule that misses an event keeps the scratch path,
and with it the wrong answer a real device would give.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

import numpy as np

from graphexec.passes.base import CompileState, Pass, PassResult
from graphexec.plan.schedule import Schedule
from graphexec.plan.tasks import TaskGraph

Interval = tuple[int, float, Any]   # (begin, end, reading task) in bytes of a root


def _extent(graph: Any, tasks: TaskGraph, name: str) -> tuple[str, int, float]:
    """(root, first byte, end byte) of ``name``; an unknown size reaches to the root's end."""
    root, off = tasks.locate(name)
    t = graph.values[name].type
    size = float(t.nbytes) if t.is_static and name not in tasks.slots else float("inf")   # strided: to the end
    return root, off, off + size


def _readers(graph: Any, tasks: TaskGraph, writes: bool = False,
             extents: dict[str, tuple[str, int, float]] | None = None) -> dict[str, list[Interval]]:
    """Per root, the byte ranges each kernel task reads (or, with ``writes``, writes);
    ``extents`` keeps each name's ``_extent`` for the caller."""
    out: dict[str, list[Interval]] = {}
    ext = {} if extents is None else extents
    for t in tasks.tasks:
        for name in (t.writes if writes else t.reads):
            if name:
                e = ext.get(name)
                if e is None:
                    e = ext[name] = _extent(graph, tasks, name)
                root, lo, hi = e
                out.setdefault(root, []).append((lo, hi, t))
    return out


def plannable(graph: Any, name: str) -> bool:
    """A static, typed output whose bytes the plan placed (so its view exists before the run)."""
    t = graph.values[name].type
    return t.is_static and t.dtype is not None and np.dtype(t.dtype).kind in "biufc"


def direct_tasks(graph: Any, tasks: TaskGraph, schedule: Schedule, where: Mapping[str, Any]) -> set[int]:
    """Ids of the kernel tasks whose outputs may be computed into their planned views."""
    extents: dict[str, tuple[str, int, float]] = {}
    readers = _readers(graph, tasks, extents=extents)
    ok: set[int] = set()
    for t in tasks.tasks:
        if t.writes and all(_safe(graph, tasks, schedule, where, readers, t, o, extents) for o in t.writes):
            ok.add(t.id)
    return ok


def _safe(graph: Any, tasks: TaskGraph, schedule: Schedule, where: Mapping[str, Any],
          readers: dict[str, list[Interval]], task: Any, name: str,
          extents: dict[str, tuple[str, int, float]]) -> bool:
    root, lo, hi = extents.get(name) or _extent(graph, tasks, name)
    if root not in where or not plannable(graph, name) or name in tasks.slots:   # a kernel's out= is contiguous
        return False
    for r_lo, r_hi, reader in readers.get(root, ()):
        if r_lo >= hi or lo >= r_hi:
            continue
        if reader is task:
            if name in tasks.inplace:   # it reads each element before writing it
                continue
            return False
        if not (schedule.before(task, reader) or schedule.before(reader, task)):
            return False
    return True


class DirectWrites(Pass):
    """Finds the kernel tasks that may compute straight into their planned output bytes."""

    name = "direct"

    def call(self, state: CompileState) -> PassResult:
        ok = direct_tasks(state.graph, state.need_tasks(), state.need_schedule(), state.need_memory_plan().by_name)
        return PassResult(replace(state, direct=frozenset(ok)), bool(ok))


def producers(graph: Any, tasks: TaskGraph, schedule: Schedule) -> dict[int, list[Any] | None]:
    """Per kernel task, the tasks that write the bytes it reads, or None when one of them is
    not ordered before it (its inputs may change while it runs: it must compute at its start)."""
    writers = _readers(graph, tasks, writes=True)
    out: dict[int, list[Any] | None] = {}
    for t in tasks.tasks:
        found: list[Any] | None = []
        for name in t.reads:
            root, lo, hi = _extent(graph, tasks, name)
            for w_lo, w_hi, w in writers.get(root, ()):
                if w_lo < hi and lo < w_hi and found is not None:
                    found = None if w is t or not schedule.before(w, t) else found + [w]
        out[t.id] = None if found is None else list(dict.fromkeys(found))
    return out
