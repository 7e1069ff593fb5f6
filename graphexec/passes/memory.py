"""Memory planning: an offset for every tensor, activations reusing pool blocks.

A pure function of the task graph and the schedule. Weights and graph inputs and
outputs get fixed places of their own (as in GE); intermediates share one pool, where
two may overlap only if one's last read comes before the other's write in the
schedule. Offsets come from greedy-by-size best fit (TFLite's arena planner).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from graphexec.ir import Graph
from graphexec.passes.base import CompileState, Pass, PassResult
from graphexec.passes.events import Schedule
from graphexec.passes.joint import joint_plan
from graphexec.passes.lifetimes import Lifetime, lifetimes
from graphexec.passes.placement import cut_bound, plan_offsets
from graphexec.passes.tasks import TaskGraph

log = logging.getLogger(__name__)
ALIGN = 512  # GE's MEM_ALIGN_SIZE


def align(n: int, to: int = ALIGN) -> int:
    return (n + to - 1) // to * to


@dataclass(frozen=True, slots=True)
class PlanEntry:
    """Where one tensor lives: region, offset in it, size, and its lifetime."""

    tensor: str
    offset: int
    size: int
    region: str          # "activation", "io" or "weight"
    first: int = 0       # index of the writing task in the schedule
    last: int = 0        # index of the last reading task
    stream: int = 0


@dataclass
class MemoryPlan:
    """All placements plus the sizes of each region."""

    entries: list[PlanEntry]
    region_bytes: dict[str, int]
    lower_bound_bytes: int        # live peak if the tasks ran one at a time in launch order
    no_reuse_bytes: int
    cut_bound_bytes: int | None = None   # most bytes that may be live together in the partial order
    items: list = field(default_factory=list, repr=False)    # activation lifetimes, for joint planning
    clash: list = field(default_factory=list, repr=False)    # their conflict lists
    joint: dict = field(default_factory=dict)                # what memory="joint" did and cost
    by_name: dict[str, PlanEntry] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.by_name = {e.tensor: e for e in self.entries}

    def __iter__(self):
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    @property
    def peak_bytes(self) -> int:
        return self.region_bytes.get("activation", 0)


def _live_peak(items: list[Lifetime]) -> int:
    """Most bytes live at once when the tasks run one at a time in launch order."""
    deltas: dict[int, int] = {}
    for it in items:
        size, first, last = it.size, it.first, it.last
        deltas[first] = deltas.get(first, 0) + size
        deltas[last + 1] = deltas.get(last + 1, 0) - size
    peak = cur = 0
    for k in sorted(deltas):
        cur += deltas[k]
        peak = max(peak, cur)
    return peak


def plan_memory(graph: Graph, tasks: TaskGraph, schedule: Schedule, reuse: bool = True) -> MemoryPlan:
    """Place every static tensor; dynamic ones are left to the runtime allocator."""
    io_roots = set(graph.inputs) | {tasks.root(o) for o in graph.outputs}
    entries: list[PlanEntry] = []
    cursor = {"io": 0, "weight": 0}

    def fixed(name: str, region: str, size: int) -> None:
        entries.append(PlanEntry(name, cursor[region], size, region))
        cursor[region] += align(size)

    read = {r for tk in tasks.tasks for r in tk.reads}
    consts = graph.constants
    for name in consts:
        t = graph.values[name].type
        if t.is_static and name in read:
            fixed(name, "weight", t.nbytes)
    sizes: dict[str, int] = {}
    for name in dict.fromkeys(list(graph.inputs) + [tasks.root(w) for tk in tasks.tasks for w in tk.writes]):
        t = graph.values[name].type
        if not t.is_static or name in consts:
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
        cut: int | None = _live_peak(acts)
    else:
        cut = cut_bound(acts, clash) if clash is not None else None
    return MemoryPlan(entries, regions, _live_peak(acts), no_reuse, cut, acts, clash or [])


class MemoryPlanning(Pass):
    name = "memory"

    def call(self, state: CompileState) -> PassResult:
        mode = state.options.memory if state.options is not None else "reuse"
        plan = lambda sched: plan_memory(state.graph, state.tasks, sched, mode != "none")  # noqa: E731
        if mode == "joint" and len(state.schedule.streams) > 1:
            from graphexec.engine.simulate import simulate_times

            state.schedule, state.memory_plan, report = joint_plan(
                state.tasks, state.schedule, plan, lambda sched: simulate_times(sched, state.profile, state.options.launch == "graph"))
            state.memory_plan.joint = report
        else:
            state.memory_plan = plan(state.schedule)
        return PassResult(state, True)
