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
from graphexec.passes.streams import Schedule
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
    lower_bound_bytes: int
    no_reuse_bytes: int
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


def lifetimes(tasks: TaskGraph, schedule: Schedule) -> dict[str, tuple[int, int, int]]:
    """(first write, last read, stream) per root value written by a task."""
    life: dict[str, list[int]] = {}
    for i, t in enumerate(schedule.order):
        for w in t.writes:
            life.setdefault(w, [i, i, t.stream])
        for r in t.reads:
            if r in life:
                life[r][1] = max(life[r][1], i)
    return {k: (v[0], v[1], v[2]) for k, v in life.items()}


def best_fit(items: list[tuple[str, int, int, int]]) -> tuple[dict[str, int], int]:
    """Greedy by size, best fit: offsets for (name, size, first, last) items, and the peak."""
    placed: list[tuple[int, int, int, int]] = []  # offset, size, first, last
    offsets: dict[str, int] = {}
    peak = 0
    for name, size, first, last in sorted(items, key=lambda x: (-x[1], x[2], x[0])):
        live = sorted((o, s) for o, s, f, l in placed if f <= last and first <= l)
        best, best_gap, cursor = None, None, 0
        for o, s in live:
            gap = o - cursor
            if gap >= size and (best_gap is None or gap < best_gap):
                best, best_gap = cursor, gap
            cursor = max(cursor, o + s)
        offset = cursor if best is None else best
        offsets[name] = offset
        placed.append((offset, size, first, last))
        peak = max(peak, offset + size)
    return offsets, peak


def _live_peak(items: list[tuple[str, int, int, int]]) -> int:
    deltas: dict[int, int] = {}
    for _, size, first, last in items:
        deltas[first] = deltas.get(first, 0) + size
        deltas[last + 1] = deltas.get(last + 1, 0) - size
    peak = cur = 0
    for k in sorted(deltas):
        cur += deltas[k]
        peak = max(peak, cur)
    return peak


def plan_memory(graph: Graph, tasks: TaskGraph, schedule: Schedule, reuse: bool = True) -> MemoryPlan:
    """Place every static tensor; dynamic ones are left to the runtime allocator."""
    life = lifetimes(tasks, schedule)
    io_roots = set(graph.inputs) | {tasks.root(o) for o in graph.outputs}
    entries: list[PlanEntry] = []
    cursor = {"io": 0, "weight": 0}

    def fixed(name: str, region: str, size: int) -> None:
        entries.append(PlanEntry(name, cursor[region], size, region))
        cursor[region] += align(size)

    read = {r for tk in tasks.tasks for r in tk.reads}
    for name in graph.constants:
        t = graph.values[name].type
        if t.is_static and name in read:
            fixed(name, "weight", t.nbytes)
    acts: list[tuple[str, int, int, int]] = []
    streams: dict[str, int] = {}
    placed_io: set[str] = set()
    for name in list(graph.inputs) + list(life):
        t = graph.values[name].type
        if not t.is_static or name in graph.constants:
            continue
        if name in io_roots:
            if name not in placed_io:
                placed_io.add(name)
                fixed(name, "io", t.nbytes)
            continue
        first, last, stream = life[name]
        acts.append((name, align(max(t.nbytes, 1)), first, last))
        streams[name] = stream
    no_reuse = sum(a[1] for a in acts)
    if reuse:
        offsets, peak = best_fit(acts)
    else:
        offsets, peak, acc = {}, no_reuse, 0
        for a in acts:
            offsets[a[0]], acc = acc, acc + a[1]
    for name, size, first, last in acts:
        entries.append(PlanEntry(name, offsets[name], graph.values[name].type.nbytes, "activation",
                                 first, last, streams[name]))
    regions = {"activation": peak, "io": cursor["io"], "weight": cursor["weight"]}
    log.debug("memory plan: pool %d bytes, %d without reuse", peak, no_reuse)
    return MemoryPlan(entries, regions, _live_peak(acts), no_reuse)


class MemoryPlanning(Pass):
    name = "memory"

    def call(self, state: CompileState) -> PassResult:
        reuse = state.options.memory_reuse if state.options is not None else True
        state.memory_plan = plan_memory(state.graph, state.tasks, state.schedule, reuse)
        return PassResult(state, True)
