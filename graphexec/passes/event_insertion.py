"""Event insertion: record/wait pairs for the dependencies that cross streams, no more.

Tasks are walked in launch order with a vector clock per stream: ``clock[s][t]`` is how
many tasks of stream t are known to have finished before the current point of stream s.
A dependency u -> v is already satisfied when v's stream knows u's position; otherwise a
wait on u's event is added, which merges u's clock at its record. Because clocks carry
what every earlier wait taught, waits implied through any chain of streams are dropped,
not only those within one pair of streams (GE, XLA).
"""

from __future__ import annotations

import heapq
from dataclasses import replace

from graphexec.plan.clocks import Clocks
from graphexec.plan.schedule import Schedule
from graphexec.plan.tasks import AnyTask, EventTask, TaskGraph, TaskKind

GE_RESERVED_TASKS = 27  # GE keeps 7 profiling + 20 tasks of each stream in reserve


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


def insert_events(tasks: TaskGraph, stream_of: list[int], policy: str = "single",
                  priorities: tuple[int | None, ...] = (), clocked: bool = True) -> Schedule:
    """Build the schedule: streams in launch order, minimal waits, shared records.

    ``clocked=False`` leaves the vector clocks out (``with_clocks`` adds them): a candidate
    that the auto search only simulates, and may drop, needs none (a third of the pass)."""
    n_streams = max(stream_of, default=0) + 1
    clocks = Clocks(n_streams)
    waits: list[tuple[int, int]] = []  # (consumer id, producer id): waits placed before the consumer
    crossing = 0
    for v in tasks.tasks:
        s = stream_of[v.id]
        preds = sorted([p for p in tasks.deps.get(v.id, ()) if stream_of[p] != s], reverse=True)   # ids are distinct
        crossing += len(preds)
        for u in preds:  # latest producer first: its clock may imply the others
            if clocks.current(s, stream_of[u]) > clocks.pos[u]:
                continue
            waits.append((v.id, u))
            clocks.merge_after(s, u)
        clocks.add(v.id, s)
    order, streams, stream_all = _materialize(tasks, stream_of, waits, n_streams)
    clock = _clocks(order, stream_all, n_streams) if clocked else Clocks(n_streams)
    num_ids = max((t.event + 1 for t in order if isinstance(t, EventTask)), default=0)
    return Schedule(streams, order, stream_all, len(waits), num_ids, policy,
                    {"waits_before_pruning": crossing, "waits_after_pruning": len(waits)}, clock, clock.pos,
                    tuple(priorities))


def with_clocks(schedule: Schedule) -> Schedule:
    """``schedule`` (built with ``clocked=False``) with its vector clocks and positions."""
    clock = _clocks(schedule.order, schedule.stream_of, len(schedule.streams))
    return replace(schedule, clock=clock, pos=clock.pos)


def _materialize(tasks: TaskGraph, stream_of: list[int], waits: list[tuple[int, int]],
                 n_streams: int) -> tuple[list[AnyTask], list[list[AnyTask]], list[int]]:
    """Turn the chosen waits into record/wait tasks: (launch order, streams, stream of every task id)."""
    waited_on = {u for _, u in waits}
    waits_before: dict[int, list[int]] = {}
    for consumer, producer in waits:
        waits_before.setdefault(consumer, []).append(producer)
    logical = {u: i for i, u in enumerate(sorted(waited_on))}   # one logical event per producer
    record_of: dict[int, int] = {}   # producer id -> id of its record task
    slots: list[tuple[TaskKind, str, int, int]] = []   # (kind, name, stream, producer) per event task
    order_ids: list[int] = []
    next_id = len(tasks.tasks)
    for v in tasks.tasks:
        s = stream_of[v.id]
        for u in waits_before.get(v.id, ()):
            slots.append((TaskKind.EVENT_WAIT, f"wait {tasks.tasks[u].name}", s, u))
            order_ids.append(next_id)
            next_id += 1
        order_ids.append(v.id)
        if v.id in waited_on:
            record_of[v.id] = next_id
            slots.append((TaskKind.EVENT_RECORD, f"record {v.name}", s, v.id))
            order_ids.append(next_id)
            next_id += 1
    base = len(tasks.tasks)
    kinds = [(k, logical[u]) for k, _, _, u in slots]
    ids = reuse_event_ids([(kinds[i - base] if i >= base else None) for i in order_ids])
    events = [EventTask(base + j, k, name, s, ids[j], record_of[u]) for j, (k, name, s, u) in enumerate(slots)]
    stream_all = list(stream_of) + [e.stream for e in events]
    order: list[AnyTask] = [events[i - base] if i >= base else tasks.tasks[i] for i in order_ids]
    streams: list[list[AnyTask]] = [[] for _ in range(n_streams)]
    for t in order:
        streams[stream_all[t.id]].append(t)
    return order, streams, stream_all


def reuse_event_ids(order: list[tuple[TaskKind, int] | None]) -> list[int]:
    """Event ids by interval colouring over launch order, for the event tasks among
    ``order`` ((kind, logical event) or None for a kernel), in their order: an id is free
    again once the last wait on it has been launched (a wait binds to the record newest at
    its launch)."""
    last_wait: dict[int, int] = {}
    for i, t in enumerate(order):
        if t is not None and t[0] is TaskKind.EVENT_WAIT:
            last_wait[t[1]] = i
    free: list[int] = []              # a heap: the smallest free id is taken first
    busy: list[tuple[int, int]] = []  # a heap of (release index, id)
    logical_to_id: dict[int, int] = {}
    ids: list[int] = []
    n = 0
    for i, t in enumerate(order):
        while busy and busy[0][0] < i:
            heapq.heappush(free, heapq.heappop(busy)[1])
        if t is None:
            continue
        kind, event = t
        if kind is TaskKind.EVENT_RECORD:
            eid = heapq.heappop(free) if free else n
            n += eid == n
            logical_to_id[event] = eid
            heapq.heappush(busy, (last_wait.get(event, i), eid))
        ids.append(logical_to_id[event])
    return ids


def _clocks(order: list[AnyTask], stream_of: list[int], n_streams: int) -> Clocks:
    """Vector clock at each task's start and its position in its stream."""
    clocks = Clocks(n_streams)
    for t in order:
        s = stream_of[t.id]
        if isinstance(t, EventTask) and t.kind is TaskKind.EVENT_WAIT:
            clocks.merge_after(s, t.record)
        clocks.add(t.id, s)
    return clocks
