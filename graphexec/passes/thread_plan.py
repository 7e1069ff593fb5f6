"""The thread plan: which kernels may compute on worker threads, and who waits for whom
(``Session(threads=N)``; the engine's ``threads.py`` runs it)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from graphexec.ir import Graph
from graphexec.passes.base import CompileState, Pass, PassResult
from graphexec.passes.direct_writes import producers
from graphexec.plan.schedule import Schedule
from graphexec.plan.tasks import TaskGraph

MIN_FLOPS = 2e6       # below this (and MIN_BYTES) a worker costs more than the math
MIN_BYTES = 1 << 20


@dataclass(frozen=True)
class ThreadPlan:
    """What a compiled plan needs to run its kernels on threads: who may, and who waits for whom."""

    index: dict[int, int]              # task id -> launch index among kernels
    needs: dict[int, int]              # task id -> number of producers (eligible tasks only)
    consumers: dict[int, list[int]]    # task id -> eligible tasks reading what it writes

    @classmethod
    def of(cls, graph: Graph, tasks: TaskGraph, schedule: Schedule) -> ThreadPlan:
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
        return cls({t.id: i for i, t in enumerate(kernels)}, needs, consumers)


class ThreadPlanning(Pass):
    """Plans the kernels' threads; only in a pipeline for more than one host thread."""

    name = "threads"

    def call(self, state: CompileState) -> PassResult:
        plan = ThreadPlan.of(state.graph, state.need_tasks(), state.need_schedule())
        return PassResult(replace(state, threads=plan), True)
