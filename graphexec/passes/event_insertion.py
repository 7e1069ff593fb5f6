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
from dataclasses import dataclass, replace

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
    waits, crossing = prune_waits(tasks, stream_of)
    return events_schedule(tasks, stream_of, waits, crossing, policy, priorities, clocked)


def prune_waits(tasks: TaskGraph, stream_of: list[int]) -> tuple[list[tuple[int, int]], int]:
    """The waits to place, as (consumer id, producer id) in launch order, and how many
    dependencies cross streams (the waits before pruning)."""
    clocks = Clocks(max(stream_of, default=0) + 1)
    waits: list[tuple[int, int]] = []  # (consumer id, producer id): waits placed before the consumer
    crossing = 0
    deps = tasks.deps
    for v in tasks.tasks:
        vid = v.id
        s = stream_of[vid]
        ps = deps.get(vid)
        if ps:
            preds = sorted([p for p in ps if stream_of[p] != s], reverse=True)   # ids are distinct
            crossing += len(preds)
            for u in preds:  # latest producer first: its clock may imply the others
                if clocks.current(s, stream_of[u]) > clocks.pos[u]:
                    continue
                waits.append((vid, u))
                clocks.merge_after(s, u)
        clocks.add(vid, s)
    return waits, crossing


def events_schedule(tasks: TaskGraph, stream_of: list[int], waits: list[tuple[int, int]], crossing: int,
                    policy: str, priorities: tuple[int | None, ...] = (), clocked: bool = True,
                    slots: Slots | None = None) -> Schedule:
    """The schedule of ``prune_waits``' waits (see ``insert_events``); ``slots``: their
    ``event_slots``, if worked out already."""
    n_streams = max(stream_of, default=0) + 1
    slots = slots if slots is not None else event_slots(tasks, stream_of, waits)
    order, streams, stream_all = _materialize(tasks, stream_of, slots, n_streams)
    clock = _clocks(order, stream_all, n_streams) if clocked else Clocks(n_streams)
    num_ids = max((t.event + 1 for t in order if isinstance(t, EventTask)), default=0)
    return Schedule(streams, order, stream_all, len(waits), num_ids, policy,
                    {"waits_before_pruning": crossing, "waits_after_pruning": len(waits)}, clock, clock.pos,
                    tuple(priorities))


def with_clocks(schedule: Schedule) -> Schedule:
    """``schedule`` (built with ``clocked=False``) with its vector clocks and positions."""
    clock = _clocks(schedule.order, schedule.stream_of, len(schedule.streams))
    return replace(schedule, clock=clock, pos=clock.pos)


@dataclass(frozen=True)
class Slots:
    """The record and wait tasks that the chosen waits become, before they are made: the
    launch order as task ids (the j-th event task's id is ``len(tasks.tasks) + j``) and
    per event task its kind, stream, producer (the kernel recorded or waited for) and
    device event id. The auto search simulates a candidate from these alone."""

    order: list[int]
    kinds: list[TaskKind]
    streams: list[int]
    producers: list[int]
    events: list[int]


def event_slots(tasks: TaskGraph, stream_of: list[int], waits: list[tuple[int, int]]) -> Slots:
    """Each wait placed before its consumer, one record after each producer waited on."""
    waited_on = {u for _, u in waits}
    waits_before: dict[int, list[int]] = {}
    for consumer, producer in waits:
        waits_before.setdefault(consumer, []).append(producer)
    logical = {u: i for i, u in enumerate(sorted(waited_on))}   # one logical event per producer
    kinds: list[TaskKind] = []
    streams: list[int] = []
    producers: list[int] = []
    order_ids: list[int] = []
    at: list[int] = []         # each event task's index in the launch order
    is_wait: list[bool] = []
    next_id = len(tasks.tasks)
    wait, record = TaskKind.EVENT_WAIT, TaskKind.EVENT_RECORD
    for v in tasks.tasks:
        vid = v.id
        s = stream_of[vid]
        before = waits_before.get(vid)
        if before is not None:
            for u in before:
                kinds.append(wait)
                is_wait.append(True)
                streams.append(s)
                producers.append(u)
                at.append(len(order_ids))
                order_ids.append(next_id)
                next_id += 1
        order_ids.append(vid)
        if vid in waited_on:
            kinds.append(record)
            is_wait.append(False)
            streams.append(s)
            producers.append(vid)
            at.append(len(order_ids))
            order_ids.append(next_id)
            next_id += 1
    return Slots(order_ids, kinds, streams, producers, event_ids(at, is_wait, [logical[u] for u in producers]))


def _materialize(tasks: TaskGraph, stream_of: list[int], slots: Slots,
                 n_streams: int) -> tuple[list[AnyTask], list[list[AnyTask]], list[int]]:
    """Turn the slots into record/wait tasks: (launch order, streams, stream of every task id)."""
    base = len(tasks.tasks)
    record_of = {u: base + j for j, (k, u) in enumerate(zip(slots.kinds, slots.producers))
                 if k is TaskKind.EVENT_RECORD}   # producer id -> id of its record task
    named = tasks.tasks
    events = [EventTask(base + j, k, f"{'wait' if k is TaskKind.EVENT_WAIT else 'record'} {named[u].name}", s, e,
                        record_of[u])
              for j, (k, s, u, e) in enumerate(zip(slots.kinds, slots.streams, slots.producers, slots.events))]
    stream_all = list(stream_of) + slots.streams
    everything: list[AnyTask] = [*named, *events]
    order: list[AnyTask] = [everything[i] for i in slots.order]
    streams: list[list[AnyTask]] = [[] for _ in range(n_streams)]
    for t in order:
        streams[stream_all[t.id]].append(t)
    return order, streams, stream_all


def reuse_event_ids(order: list[tuple[TaskKind, int] | None]) -> list[int]:
    """Event ids by interval colouring over launch order, for the event tasks among
    ``order`` ((kind, logical event) or None for a kernel), in their order: an id is free
    again once the last wait on it has been launched (a wait binds to the record newest at
    its launch)."""
    at = [i for i, t in enumerate(order) if t is not None]
    return event_ids(at, [order[i][0] is TaskKind.EVENT_WAIT for i in at],   # type: ignore[index]
                     [order[i][1] for i in at])   # type: ignore[index]


def event_ids(at: list[int], is_wait: list[bool], logical: list[int]) -> list[int]:
    """``reuse_event_ids`` of the event tasks alone: each one's index in the launch order
    (increasing), whether it is a wait, and its logical event. An id is released into the
    free heap only when a record looks for one: the ids released by then are the same."""
    last_wait: dict[int, int] = {}
    for i, w, e in zip(at, is_wait, logical):
        if w:
            last_wait[e] = i
    free: list[int] = []              # a heap: the smallest free id is taken first
    busy: list[tuple[int, int]] = []  # a heap of (release index, id)
    logical_to_id: dict[int, int] = {}
    ids: list[int] = []
    n = 0
    push, pop = heapq.heappush, heapq.heappop
    for i, w, e in zip(at, is_wait, logical):
        if w:
            ids.append(logical_to_id[e])
            continue
        while busy and busy[0][0] < i:
            push(free, pop(busy)[1])
        eid = pop(free) if free else n
        n += eid == n
        logical_to_id[e] = eid
        push(busy, (last_wait.get(e, i), eid))
        ids.append(eid)
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
