"""What the passes promise, checked: the ``ensures`` of lowering, stream assignment and
memory planning (on in the tests, off by default; see ``passes/base.py``).

Each check derives its verdict its own way, not with the code it checks: events from
a sync graph of stream order and record -> wait edges, memory from byte ranges and the
schedule's happens-before. Every failure is an ``InvariantError`` (an internal bug).
"""

from __future__ import annotations

import networkx as nx

from graphexec.errors import GraphError, InvariantError
from graphexec.ir import Graph, verify
from graphexec.plan import EventTask, MemoryPlan, Schedule, TaskGraph, TaskKind
from graphexec.plan.lifetimes import ordered

MINIMAL_MAX_TASKS = 5_000   # the wait-by-wait minimality check is quadratic; beyond this it is left out
PAIR_BUDGET = 200_000       # overlapping buffer pairs checked at most


def check_graph(graph: Graph) -> None:
    """The IR is well formed (``ir.verify``), as a failed invariant rather than bad input."""
    try:
        verify(graph)
    except GraphError as e:
        raise InvariantError(f"the graph a pass left is malformed: {e}") from e


def check_tasks(tasks: TaskGraph) -> None:
    """Ids are positions, dependencies point back, and aliases point straight at roots."""
    for i, t in enumerate(tasks.tasks):
        if t.id != i:
            raise InvariantError(f"task {t.name!r} has id {t.id} at position {i}")
        late = [p for p in tasks.deps.get(t.id, ()) if p >= t.id]
        if late:
            raise InvariantError(f"task {t.name!r} ({t.id}) depends on later tasks {sorted(late)}")
    chained = [a for a, r in tasks.alias.items() if r in tasks.alias]
    if chained:
        raise InvariantError(f"aliases not flattened: {chained[:3]} point at other aliases")


def sync_graph(schedule: Schedule) -> tuple[nx.DiGraph, dict[int, int]]:
    """Stream order plus an edge from each record to the waits bound to it (the newest
    record of its event id launched before the wait); also wait id -> record id."""
    g = nx.DiGraph()
    for stream in schedule.streams:
        g.add_nodes_from(t.id for t in stream)
        g.add_edges_from((a.id, b.id) for a, b in zip(stream, stream[1:]))
    newest: dict[int, int] = {}
    bound: dict[int, int] = {}
    for t in schedule.order:
        if not isinstance(t, EventTask):
            continue
        if t.kind is TaskKind.EVENT_RECORD:
            newest[t.event] = t.id
        elif t.event not in newest or newest[t.event] != t.record:
            raise InvariantError(f"wait {t.id} names record {t.record}, but binds to {newest.get(t.event)}")
        else:
            bound[t.id] = t.record
            g.add_edge(t.record, t.id)
    return g, bound


def check_events(tasks: TaskGraph, schedule: Schedule) -> None:
    """Every dependency is ordered by stream order and events; on schedules of up to
    MINIMAL_MAX_TASKS tasks, also no wait is implied by the others."""
    ids = [t.event for t in schedule.order if isinstance(t, EventTask)]
    if any(not 0 <= e < schedule.num_event_ids for e in ids):
        raise InvariantError(f"event ids outside 0..{schedule.num_event_ids - 1}")
    g, bound = sync_graph(schedule)
    small = len(schedule.order) <= MINIMAL_MAX_TASKS
    for c, ps in tasks.deps.items():
        for p in ps:
            ordered = nx.has_path(g, p, c) if small else schedule.before(tasks.tasks[p], tasks.tasks[c])
            if not ordered:
                raise InvariantError(f"dependency {tasks.tasks[p].name!r} -> {tasks.tasks[c].name!r} has no event")
    if not small:
        return
    for w, r in bound.items():
        g.remove_edge(r, w)
        implied = nx.has_path(g, r, w)
        g.add_edge(r, w)
        if implied:
            raise InvariantError(f"wait {w} on record {r} is implied by the other waits")


def check_memory(graph: Graph, tasks: TaskGraph, schedule: Schedule, plan: MemoryPlan) -> None:
    """Activation buffers that share bytes are ordered (every use of one happens before
    the other is written), and every alias entry lies inside its buffer's bytes."""
    _check_aliases(graph, tasks, plan)
    items = {it.name: it for it in plan.items}
    acts = sorted((e for e in plan.buffers if e.region == "activation"), key=lambda e: (e.offset, e.tensor))
    pairs = 0
    for i, a in enumerate(acts):
        for b in acts[i + 1:]:
            if b.offset >= a.offset + a.size or pairs >= PAIR_BUDGET:
                break
            pairs += 1
            if not (ordered(items[a.tensor], items[b.tensor], schedule)
                    or ordered(items[b.tensor], items[a.tensor], schedule)):
                raise InvariantError(f"{a.tensor!r} and {b.tensor!r} share bytes and may be live together")


def _check_aliases(graph: Graph, tasks: TaskGraph, plan: MemoryPlan) -> None:
    by_name = plan.by_name
    for e in plan.entries:
        if e.alias_of is None:
            continue
        root, off = tasks.locate(e.tensor)
        buf = by_name.get(root)
        if root != e.alias_of or buf is None or buf.alias_of is not None:
            raise InvariantError(f"{e.tensor!r} is listed in {e.alias_of!r}'s bytes, but lives in {root!r}")
        if e.offset != buf.offset + off or e.region != buf.region \
                or e.offset + e.size > buf.offset + graph.values[root].type.nbytes:
            raise InvariantError(f"{e.tensor!r} is not inside {root!r}'s bytes")
