"""The thread plan: which kernels may compute on worker threads, and who waits for whom
(``Session(threads=N)``; the engine's ``threads.py`` runs it)."""

from __future__ import annotations

from dataclasses import replace

from graphexec.ir import Graph
from graphexec.passes.base import CompileState, Pass, PassResult
from graphexec.passes.direct_writes import producers
from graphexec.plan import ThreadPlan
from graphexec.plan.schedule import Schedule
from graphexec.plan.tasks import TaskGraph

MIN_FLOPS = 2e6       # below this (and MIN_BYTES) a worker costs more than the math
MIN_BYTES = 1 << 20


def thread_plan(graph: Graph, tasks: TaskGraph, schedule: Schedule) -> ThreadPlan:
    """Which kernels may compute on worker threads, and what each waits for."""
    kernels = schedule.kernels()
    prods = producers(graph, tasks, schedule)
    needs: dict[int, int] = {}
    consumers: dict[int, list[int]] = {}
    for t in kernels:
        ps = prods.get(t.id)
        if ps is None or (t.flops < MIN_FLOPS and t.bytes < MIN_BYTES):
            continue
        needs[t.id] = len(ps)
        for p in ps:
            consumers.setdefault(p.id, []).append(t.id)
    return ThreadPlan({t.id: i for i, t in enumerate(kernels)}, needs, consumers)


class ThreadPlanning(Pass):
    """Plans the kernels' threads; only in a pipeline for more than one host thread."""

    name = "threads"

    def call(self, state: CompileState) -> PassResult:
        plan = thread_plan(state.graph, state.need_tasks(), state.need_schedule())
        return PassResult(replace(state, threads=plan), True)
