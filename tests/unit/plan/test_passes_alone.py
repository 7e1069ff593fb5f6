"""Passes run alone on tiny hand-made task graphs: no model, no lowering."""

from __future__ import annotations

import pytest

from graphexec.passes.event_insertion import insert_events, physical_streams
from graphexec.passes.makespan_bounds import MakespanBounds, fastest_us
from graphexec.passes.stream_assignment import StreamAssignment
from graphexec.plan import TaskKind
from graphexec.runtime.launch import simulate_times
from taskgraphs import DIAMOND, dag, state


def test_bounds_of_a_chain_are_its_tasks_back_to_back():
    tasks = dag({1: (0,), 2: (1,)})
    s = MakespanBounds()(state(tasks)).state
    path = sum(fastest_us(t, s.profile) for t in tasks.tasks)
    assert s.bounds is not None and s.bounds.critical_path_us == pytest.approx(path)
    assert s.bounds.lower_bound_us >= s.bounds.critical_path_us


def test_the_simulated_diamond_is_no_faster_than_its_bound():
    tasks = dag(DIAMOND)
    s = MakespanBounds()(StreamAssignment()(state(tasks, streams=2)).state).state
    makespan, times = simulate_times(s.schedule, s.profile)
    assert sorted(times) == [0, 1, 2, 3]
    assert makespan >= s.bounds.lower_bound_us - 1e-9
    assert times[3][0] >= max(times[1][1], times[2][1])     # the join waits for both branches


def test_a_long_stream_is_split_and_the_split_gets_one_event():
    tasks = dag({i: (i - 1,) for i in range(1, 12)})
    stream_of = physical_streams([0] * 12, tasks, 27 + 3 * 4)    # room for 4 tasks per stream
    assert stream_of == [0] * 4 + [1] * 4 + [2] * 4
    sched = insert_events(tasks, stream_of)
    assert sched.num_events == 2 and sched.num_event_ids == 1   # the id is free again after its wait
    waits = [t for t in sched.order if t.kind is TaskKind.EVENT_WAIT]
    assert [sched.stream_of[w.record] for w in waits] == [0, 1]


def test_one_stream_has_no_events():
    s = StreamAssignment()(state(dag(DIAMOND), streams=1)).state
    assert s.schedule.num_events == 0 and s.schedule.policy == "single"
    assert [t.id for t in s.schedule.order] == [0, 1, 2, 3]
