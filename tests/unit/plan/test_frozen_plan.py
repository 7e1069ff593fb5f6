"""The plan is a value: tasks, task graphs, schedules and memory plans are frozen, and a
pass returns a new state instead of changing the one it got."""

from __future__ import annotations

import dataclasses

import pytest

from graphexec.passes.event_insertion import insert_events
from graphexec.passes.stream_assignment import StreamAssignment, build_schedule
from graphexec.plan import EventTask, TaskKind
from taskgraphs import DIAMOND, b, dag, state


def test_tasks_and_plans_cannot_be_changed():
    tasks = dag(DIAMOND)
    sched = insert_events(tasks, [0, 0, 1, 0])
    for obj, field in ((tasks.tasks[0], "flops"), (tasks, "deps"), (sched, "stream_of"), (sched.order[0], "name")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(obj, field, None)


def test_streams_and_events_live_in_the_schedule_not_the_tasks():
    tasks = dag(DIAMOND)
    sched = insert_events(tasks, [0, 0, 1, 0])
    assert sched.stream_of[:4] == [0, 0, 1, 0]
    events = [t for t in sched.order if isinstance(t, EventTask)]
    # k2 on stream 1 waits for k0 and k3 waits for k2: two record/wait pairs
    assert [(t.kind, t.stream) for t in events] == [(TaskKind.EVENT_RECORD, 0), (TaskKind.EVENT_WAIT, 1),
                                                    (TaskKind.EVENT_RECORD, 1), (TaskKind.EVENT_WAIT, 0)]
    waits = [t for t in events if t.kind is TaskKind.EVENT_WAIT]
    assert all(sched.stream_of[t.id] == t.stream for t in events)
    assert [sched.order[[x.id for x in sched.order].index(w.record)].name for w in waits] == ["record k0", "record k2"]
    assert not hasattr(tasks.tasks[0], "stream") and not hasattr(tasks.tasks[0], "runner")


def test_building_other_schedules_leaves_the_first_as_it_was():
    tasks = dag(DIAMOND)
    first = build_schedule(tasks, "list", 2, state(tasks).profile)
    before = (list(first.stream_of), [t.id for t in first.order])
    build_schedule(tasks, "single", 1, state(tasks).profile)
    build_schedule(tasks, "chains", 4, state(tasks).profile)
    assert (list(first.stream_of), [t.id for t in first.order]) == before


def test_a_pass_returns_a_new_state():
    s0 = state(dag(DIAMOND), streams=2)
    s1 = StreamAssignment()(s0).state
    assert s0.schedule is None and s1.schedule is not None and s1.tasks is s0.tasks
    assert len(s1.schedule.streams) == 2


def test_auto_keeps_the_winner_it_built():
    tasks = dag({i: (0,) for i in range(1, 6)})
    s = StreamAssignment()(state(tasks, streams="auto")).state
    assert s.schedule.stats["auto_candidates"] == 3 * 3 + 1 * 3
    assert [t.id for t in s.schedule.order if t.kind is TaskKind.KERNEL] == list(range(6))


def test_b_builds_what_lowering_would():
    t = b(3, ("t1",))
    assert (t.id, t.reads, t.writes, t.kind) == (3, ("t1",), ("t3",), TaskKind.KERNEL)
