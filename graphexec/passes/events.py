"""Event insertion: record/wait pairs for the dependencies that cross streams, no more.

Tasks are walked in launch order with a vector clock per stream: ``clock[s][t]`` is how
many tasks of stream t are known to have finished before the current point of stream s.
A dependency u -> v is already satisfied when v's stream knows u's position; otherwise a
wait on u's event is added, which merges u's clock at its record. Because clocks carry
what every earlier wait taught, waits implied through any chain of streams are dropped,
not only those within one pair of streams (GE, XLA).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from graphexec.passes.clocks import Clocks
from graphexec.passes.tasks import Task, TaskGraph, TaskKind

GE_RESERVED_TASKS = 27  # GE keeps 7 profiling + 20 tasks of each stream in reserve


@dataclass
class Schedule:
    """Per stream, its tasks in order (records and waits included), plus the launch order.

    ``clock`` holds the vector clock at each task's start (what has surely finished: per
    stream, a count of tasks; ``clock.get(task.id, s)``, stored sparsely, see ``clocks.py``)
    and ``pos[task.id]`` is the task's index in its stream; together they answer
    happens-before (see :meth:`before`).
    """

    streams: list[list[Task]]
    order: list[Task]
    num_events: int = 0
    num_event_ids: int = 0
    policy: str = "single"
    stats: dict[str, int] = field(default_factory=dict)
    clock: Any = field(default_factory=lambda: Clocks(0))
    pos: dict[int, int] = field(default_factory=dict)
    priorities: list[int | None] = field(default_factory=list)   # per stream; None: the default

    def before(self, a: Task, b: Task) -> bool:
        """True when ``a`` surely ends before ``b`` starts (stream order or events)."""
        return self.clock.get(b.id, a.stream) > self.pos[a.id]


def physical_streams(stream_of: list[int], tasks: TaskGraph, max_tasks: int) -> list[int]:
    """Split streams whose task count would pass the device limit, as GE's SplitStreams does.

    A logical stream whose tasks (kernels plus up to one record and one wait each) could
    exceed ``max_tasks - 27`` continues on a fresh stream; the dependency between the two
    parts then crosses streams and gets its event like any other.
    """
    budget = max(1, (max_tasks - GE_RESERVED_TASKS) // 3)
    used: dict[int, int] = {}
    part_of: dict[int, int] = {}
    fresh = max(stream_of, default=0) + 1
    out = []
    for t in tasks.tasks:
        s = stream_of[t.id]
        if used.get(s, 0) >= budget:
            used[s] = 0
            part_of[s] = fresh
            fresh += 1
        used[s] = used.get(s, 0) + 1
        out.append(part_of.get(s, s))
    return out


def insert_events(tasks: TaskGraph, stream_of: list[int], policy: str = "single") -> Schedule:
    """Build the schedule: streams in launch order, minimal waits, shared records."""
    n_streams = max(stream_of, default=0) + 1
    kernels = tasks.tasks
    for t in kernels:
        t.stream = stream_of[t.id]
    clocks = Clocks(n_streams)
    next_id = len(kernels)
    waits: list[tuple[Task, int]] = []  # (consumer, producer id): waits placed before consumer
    crossing = 0
    for v in kernels:
        s = v.stream
        preds = sorted((tasks.tasks[p] for p in tasks.deps.get(v.id, ()) if tasks.tasks[p].stream != s),
                       key=lambda u: -u.id)
        crossing += len(preds)
        for u in preds:  # latest producer first: its clock may imply the others
            if clocks.current(s, u.stream) > clocks.pos[u.id]:
                continue
            waits.append((v, u.id))
            clocks.merge_after(s, u.id)
        clocks.add(v.id, s)
    return _materialize(tasks, stream_of, waits, crossing, policy, n_streams, next_id)


def _materialize(tasks: TaskGraph, stream_of: list[int], waits: list[tuple[Task, int]], crossing: int,
                 policy: str, n_streams: int, next_id: int) -> Schedule:
    """Turn the chosen waits into record/wait tasks and a launch order."""
    waited_on = {u for _, u in waits}
    waits_before: dict[int, list[int]] = {}
    for v, u in waits:
        waits_before.setdefault(v.id, []).append(u)
    event_of: dict[int, int] = {u: i for i, u in enumerate(sorted(waited_on))}
    order: list[Task] = []
    streams: list[list[Task]] = [[] for _ in range(n_streams)]
    for v in tasks.tasks:
        for u in waits_before.get(v.id, ()):
            w = Task(next_id, TaskKind.EVENT_WAIT, f"wait {tasks.tasks[u].name}", stream=v.stream, event=event_of[u])
            next_id += 1
            order.append(w)
            streams[v.stream].append(w)
        order.append(v)
        streams[v.stream].append(v)
        if v.id in waited_on:
            r = Task(next_id, TaskKind.EVENT_RECORD, f"record {v.name}", stream=v.stream, event=event_of[v.id])
            next_id += 1
            order.append(r)
            streams[v.stream].append(r)
    ids = reuse_event_ids(order)
    sched = Schedule(streams, order, len(waits), max(ids.values(), default=-1) + 1, policy,
                     {"waits_before_pruning": crossing, "waits_after_pruning": len(waits)})
    for t in order:
        if t.event is not None:
            t.event = ids[t.id]
    _clocks(sched, n_streams)
    return sched


def reuse_event_ids(order: list[Task]) -> dict[int, int]:
    """Event ids by interval colouring over launch order: an id is free again once the last
    wait on it has been launched (a wait binds to the record newest at its launch)."""
    last_wait: dict[int, int] = {}
    for i, t in enumerate(order):
        if t.kind is TaskKind.EVENT_WAIT:
            last_wait[t.event] = i
    free: list[int] = []
    busy: list[tuple[int, int]] = []  # (release index, id)
    logical_to_id: dict[int, int] = {}
    ids: dict[int, int] = {}
    n = 0
    for i, t in enumerate(order):
        busy.sort()
        while busy and busy[0][0] < i:
            free.append(busy.pop(0)[1])
        if t.kind is TaskKind.EVENT_RECORD:
            free.sort()
            eid = free.pop(0) if free else n
            n += eid == n
            logical_to_id[t.event] = eid
            busy.append((last_wait.get(t.event, i), eid))
        if t.kind in (TaskKind.EVENT_RECORD, TaskKind.EVENT_WAIT):
            ids[t.id] = logical_to_id[t.event]
    return ids


def _clocks(sched: Schedule, n_streams: int) -> None:
    """Vector clock at each task's start and its position in its stream."""
    clocks = Clocks(n_streams)
    newest: dict[int, int] = {}   # event id -> its newest record task
    for t in sched.order:
        if t.kind is TaskKind.EVENT_WAIT:
            clocks.merge_after(t.stream, newest[t.event])
        clocks.add(t.id, t.stream)
        if t.kind is TaskKind.EVENT_RECORD:
            newest[t.event] = t.id
    sched.clock, sched.pos = clocks, clocks.pos
