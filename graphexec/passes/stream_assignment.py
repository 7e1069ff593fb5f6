"""The stream-assignment pass: policy, stream labels, device limits, events, auto search."""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

from graphexec import _switch
from graphexec.errors import GraphExecError, PassError
from graphexec.passes.base import CompileState, Pass, PassResult
from graphexec.passes.contracts import check_events
from graphexec.passes.event_insertion import (
    Slots,
    event_slots,
    events_schedule,
    insert_events,
    physical_streams,
    prune_waits,
)
from graphexec.passes.stream_policies import POLICIES, shared_weights
from graphexec.plan.schedule import Schedule
from graphexec.plan.tasks import TaskGraph, TaskKind
from graphexec.runtime.launch import compiled_makespan, order_tasks, simulate_makespan
from graphexec.runtime.profiles import DeviceProfile

log = logging.getLogger(__name__)
AUTO_LIMITS = (1, 2, 4, 8)


def _apply_labels(tasks: TaskGraph, stream_of: list[int]) -> list[int]:
    """GE's AssignByLabelPass: each stream_label gets a stream of its own, shared by the
    tasks that carry it; unlabelled tasks keep the policy's streams."""
    base = max(stream_of, default=-1) + 1
    label_stream: dict[str, int] = {}
    for t in tasks.tasks:
        label = t.node.meta.get("stream_label") if t.node is not None else None
        if label is not None:
            stream_of[t.id] = label_stream.setdefault(label, base + len(label_stream))
    return stream_of


def manual(tasks: TaskGraph, limit: int, profile: DeviceProfile) -> list[int]:
    """The streams of a hand-written schedule (a YAML graph's ``schedule:``), checked at load."""
    stream_of = []
    for t in tasks.tasks:
        place = t.node.meta.get("schedule_stream") if t.node is not None else None
        stream_of.append(int(place) if place is not None else 0)
    return stream_of


def _priorities(tasks: TaskGraph, stream_of: list[int]) -> tuple[int | None, ...]:
    """Per stream, the most urgent priority its nodes ask for (None: the default)."""
    prio: list[int | None] = [None] * (max(stream_of, default=0) + 1)
    for t in tasks.tasks:
        p = t.node.meta.get("priority") if t.node is not None else None
        if p is not None:
            cur = prio[stream_of[t.id]]
            prio[stream_of[t.id]] = int(p) if cur is None else min(cur, int(p))
    return tuple(prio)


def _renumber(stream_of: list[int]) -> list[int]:
    """Streams numbered from 0 by first use, as GE renumbers them."""
    ids: dict[int, int] = {}
    return [ids.setdefault(s, len(ids)) for s in stream_of]


def assign(tasks: TaskGraph, policy: str, limit: int, profile: DeviceProfile) -> list[int]:
    """Each task's stream under ``policy`` and ``limit``: labels applied, long streams split,
    numbered by first use, checked against the device's streams."""
    policies = {**POLICIES, "manual": manual}
    if policy not in policies:
        raise GraphExecError(f"unknown stream policy {policy!r}; known: {', '.join([*POLICIES, 'auto'])}")
    stream_of = policies[policy](tasks, limit, profile) if tasks.tasks else []
    stream_of = _renumber(physical_streams(_apply_labels(tasks, stream_of), tasks, profile.max_tasks_per_stream))
    n = max(stream_of, default=0) + 1
    if n > profile.max_streams:
        raise PassError(f"the schedule needs {n} streams after splitting long streams; device "
                        f"{profile.name} allows {profile.max_streams}")
    return stream_of


def _check_event_ids(n: int, profile: DeviceProfile) -> None:
    if n > profile.max_events:
        raise PassError(f"the schedule needs {n} events at once; device {profile.name} allows {profile.max_events}")


def build_schedule(tasks: TaskGraph, policy: str, limit: int, profile: DeviceProfile,
                   clocked: bool = True) -> Schedule:
    """Assign streams with ``policy`` under ``limit``, split long streams, insert events
    (``clocked=False``: without the vector clocks, see ``insert_events``)."""
    stream_of = assign(tasks, policy, limit, profile)
    schedule = insert_events(tasks, stream_of, policy, _priorities(tasks, stream_of), clocked)
    _check_event_ids(schedule.num_event_ids, profile)
    return schedule


def auto_schedule(tasks: TaskGraph, limits: tuple[int, ...], policies: list[str], profile: DeviceProfile,
                  graph_mode: bool = True) -> Schedule:
    """Try each policy and limit; keep the shortest simulated time, then fewer streams, then events.

    A candidate is simulated from its streams and event slots alone (``_draft_span``): its
    record and wait tasks and its vector clocks are made for the one kept. The candidates
    share one table of kernel times (a task's does not depend on its stream) and the
    policies one of task weights. ``GRAPHEXEC_PLAIN``: every candidate is built and priced
    whole."""
    if not _switch.fast():
        return _auto_plain(tasks, limits, policies, profile, graph_mode)
    known: dict[int, Any] = {}   # kernel times, worked out once for all candidates
    best: tuple[str, list[int], list[tuple[int, int]], int, Slots] | None = None
    best_key: tuple[float, int, int] | None = None
    with shared_weights(tasks, profile):
        for limit in limits:
            for policy in (["single"] if limit == 1 else policies):
                stream_of = assign(tasks, policy, limit, profile)
                waits, crossing = prune_waits(tasks, stream_of)
                slots = event_slots(tasks, stream_of, waits)
                _check_event_ids(max(slots.events, default=-1) + 1, profile)
                span = _draft_span(tasks, stream_of, waits, slots, profile, graph_mode, known)
                key = (round(span, 6), max(stream_of, default=0) + 1, len(waits))
                log.debug("auto: %s x%d -> %s", policy, limit, key)
                if best_key is None or key < best_key:
                    best, best_key = (policy, stream_of, waits, crossing, slots), key
    assert best is not None
    policy, stream_of, waits, crossing, slots = best
    sched = events_schedule(tasks, stream_of, waits, crossing, policy, _priorities(tasks, stream_of), slots=slots)
    return replace(sched, stats={**sched.stats, "auto_candidates": len(limits) * len(policies)})


def _draft_span(tasks: TaskGraph, stream_of: list[int], waits: list[tuple[int, int]], slots: Slots,
                profile: DeviceProfile, graph_mode: bool, known: dict[int, Any]) -> float:
    """The simulated makespan of the schedule these streams and slots make, by the compiled
    loop from columns; where it cannot run them, of the schedule made whole."""
    n_streams, n_ids = max(stream_of, default=0) + 1, max(slots.events, default=-1) + 1
    launch = order_tasks(tasks.tasks, stream_of, slots.order, [k is TaskKind.EVENT_WAIT for k in slots.kinds],
                         slots.streams, slots.events, known)
    span = None if launch is None else compiled_makespan(launch, n_streams, n_ids, profile, graph_mode)
    if span is None:
        whole = events_schedule(tasks, stream_of, waits, len(waits), "draft", clocked=False, slots=slots)
        span = simulate_makespan(whole, profile, graph_mode, known)
    return span


def _auto_plain(tasks: TaskGraph, limits: tuple[int, ...], policies: list[str], profile: DeviceProfile,
                graph_mode: bool) -> Schedule:
    """The reference search: each candidate built whole, clocks included, and simulated."""
    best: Schedule | None = None
    best_key: tuple[float, int, int] | None = None
    for limit in limits:
        for policy in (["single"] if limit == 1 else policies):
            sched = build_schedule(tasks, policy, limit, profile)
            key = (round(simulate_makespan(sched, profile, graph_mode), 6), len(sched.streams), sched.num_events)
            if best_key is None or key < best_key:
                best, best_key = sched, key
    assert best is not None
    return replace(best, stats={**best.stats, "auto_candidates": len(limits) * len(policies)})


def mark_manual(graph: Any) -> None:
    """Record each node's stream (and that stream's priority) from the graph's schedule."""
    for i, stream in enumerate(graph.meta["schedule"]["streams"]):
        names = {t["run"] for t in stream["tasks"] if "run" in t}
        for node in graph.nodes:
            if node.name in names:
                node.meta["schedule_stream"] = i
                if stream.get("priority") is not None:
                    node.meta.setdefault("priority", stream["priority"])


class StreamAssignment(Pass):
    """Chooses streams and events per the session's ``streams`` and ``policy``."""

    name = "streams"

    def call(self, state: CompileState) -> PassResult:
        opts, profile, tasks = state.options, state.profile, state.need_tasks()
        streams, policy = opts.streams, opts.stream_policy
        if policy == "manual":
            mark_manual(state.graph)
        if policy == "auto" or streams == "auto":
            limits = tuple(n for n in AUTO_LIMITS if n <= profile.max_streams) if streams == "auto" else (int(streams),)
            policies = [p for p in POLICIES if p != "single"] if policy == "auto" else [policy]
            schedule = auto_schedule(tasks, limits, policies, profile, opts.graph_mode)
        else:
            schedule = build_schedule(tasks, policy, int(streams), profile)
        return PassResult(replace(state, schedule=schedule), True)

    def requires(self, state: CompileState) -> None:
        state.need_tasks()

    def ensures(self, state: CompileState) -> None:
        check_events(state.need_tasks(), state.need_schedule())
