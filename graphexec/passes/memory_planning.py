"""Memory planning: an offset for every tensor, activations reusing pool blocks.

A pure function of the task graph and the schedule. Weights and graph inputs and
outputs get fixed places of their own (as in GE); intermediates share one pool, where
two may overlap only if one's last read comes before the other's write in the
schedule. Offsets come from greedy-by-size best fit (TFLite's arena planner).
"""

from __future__ import annotations

import logging
from dataclasses import replace

from graphexec.ir import Graph
from graphexec.passes.base import CompileState, Pass, PassResult
from graphexec.passes.contracts import check_events, check_memory
from graphexec.passes.joint_memory import joint_plan
from graphexec.passes.pool_offsets import cut_bound, live_peak, plan_offsets
from graphexec.plan.lifetimes import lifetimes
from graphexec.plan.memory import MemoryPlan, PlanEntry, align
from graphexec.plan.schedule import Schedule
from graphexec.plan.tasks import TaskGraph
from graphexec.runtime.launch import simulate_times

log = logging.getLogger(__name__)


def plan_memory(graph: Graph, tasks: TaskGraph, schedule: Schedule, reuse: bool = True,
                external: frozenset[str] = frozenset()) -> MemoryPlan:
    """Place every static tensor but the ``external`` ones (an enclosing plan's); dynamic
    ones are left to the runtime allocator."""
    io_roots = set(graph.inputs) | {tasks.root(o) for o in graph.outputs}
    entries: list[PlanEntry] = []
    cursor = {"io": 0, "weight": 0}

    def fixed(name: str, region: str, size: int) -> None:
        entries.append(PlanEntry(name, cursor[region], size, region))
        cursor[region] += align(size)

    consts = graph.constants
    read = {r for tk in tasks.tasks for r in tk.reads} if consts else set()
    for name in consts:
        t = graph.values[name].type
        if t.is_static and name in read:
            fixed(name, "weight", t.nbytes)
    sizes: dict[str, int] = {}
    for name in dict.fromkeys(list(graph.inputs) + [tasks.root(w) for tk in tasks.tasks for w in tk.writes]):
        t = graph.values[name].type
        if not t.is_static or name in consts or name in external:
            continue
        if name in io_roots:
            fixed(name, "io", t.nbytes)
        else:
            sizes[name] = align(max(t.nbytes, 1))
    acts = list(lifetimes(tasks, schedule, sizes).values())
    no_reuse = sum(a.size for a in acts)
    clash: list | None = None
    if reuse:
        offsets, peak, heuristic, clash = plan_offsets(acts, schedule)
        log.debug("memory plan: heuristic %s", heuristic)
    else:
        offsets, peak, acc = {}, no_reuse, 0
        for a in acts:
            offsets[a.name], acc = acc, acc + a.size
    for a in acts:
        entries.append(PlanEntry(a.name, offsets[a.name], graph.values[a.name].type.nbytes, "activation",
                                 a.first, a.last, a.stream))
    regions = {"activation": peak, "io": cursor["io"], "weight": cursor["weight"]}
    log.debug("memory plan: pool %d bytes, %d without reuse", peak, no_reuse)
    if len(schedule.streams) == 1:
        cut: int | None = live_peak(acts)
    else:
        cut = cut_bound(acts, clash) if clash is not None else None
    entries += _aliases(graph, tasks, {e.tensor: e for e in entries})
    return MemoryPlan(entries, regions, live_peak(acts), no_reuse, cut, acts, clash or [])


def _aliases(graph: Graph, tasks: TaskGraph, buffers: dict[str, PlanEntry]) -> list[PlanEntry]:
    """An entry for every tensor a task touches that lives in another's planned bytes
    (views, in-place outputs, Concat slices), in the order tasks first touch them."""
    out = []
    alias = tasks.alias   # a name outside it is its own root
    for name in dict.fromkeys(n for t in tasks.tasks for n in (*t.reads, *t.writes) if n in alias):
        root, off = tasks.locate(name)
        if root == name:
            continue
        buf, t = buffers.get(root), graph.values[name].type
        if buf is not None and t.is_static:
            out.append(PlanEntry(name, buf.offset + off, t.nbytes, buf.region, buf.first, buf.last, buf.stream,
                                 alias_of=root))
    return out


class MemoryPlanning(Pass):
    """Places every tensor (``memory="joint"`` may also add events, see ``joint_memory.py``)."""

    name = "memory"

    def call(self, state: CompileState) -> PassResult:
        mode, tasks, schedule = state.options.memory, state.need_tasks(), state.need_schedule()
        plan = lambda sched: plan_memory(state.graph, tasks, sched, mode != "none", state.options.external)  # noqa: E731
        if mode == "joint" and len(schedule.streams) > 1:
            graph_mode = state.options.graph_mode
            schedule, memory_plan, report = joint_plan(
                tasks, schedule, plan, lambda sched: simulate_times(sched, state.profile, graph_mode))
            memory_plan = replace(memory_plan, joint=report)
        else:
            memory_plan = plan(schedule)
        return PassResult(replace(state, schedule=schedule, memory_plan=memory_plan), True)

    def requires(self, state: CompileState) -> None:
        state.need_schedule()

    def ensures(self, state: CompileState) -> None:
        tasks, schedule = state.need_tasks(), state.need_schedule()
        if state.options.memory == "joint":   # joint planning may have added dependencies and events
            check_events(tasks, schedule)
        check_memory(state.graph, tasks, schedule, state.need_memory_plan())
