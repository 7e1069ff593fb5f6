"""The passes' ensures: each catches the bug it is there for, on tiny hand-made plans."""

from __future__ import annotations

from dataclasses import replace

import pytest
from taskgraphs import DIAMOND, dag, state

import graphexec.passes.base as base
from graphexec.errors import InvariantError
from graphexec.passes.base import Pass, PassManager, PassResult
from graphexec.passes.contracts import check_events, check_memory, check_tasks
from graphexec.passes.event_insertion import insert_events
from graphexec.passes.stream_assignment import StreamAssignment
from graphexec.plan import EventTask, MemoryPlan, PlanEntry, Schedule, TaskKind
from graphexec.plan.lifetimes import lifetimes


def _without(sched: Schedule, drop: set[int]) -> Schedule:
    keep = [t for t in sched.order if t.id not in drop]
    streams = [[t for t in s if t.id not in drop] for s in sched.streams]
    return replace(sched, order=keep, streams=streams)


def test_the_inserted_events_pass_their_check():
    tasks = dag(DIAMOND)
    check_events(tasks, insert_events(tasks, [0, 0, 1, 0]))


def test_a_missing_wait_is_caught():
    tasks = dag(DIAMOND)
    sched = insert_events(tasks, [0, 0, 1, 0])
    wait = next(t for t in sched.order if t.kind is TaskKind.EVENT_WAIT)
    with pytest.raises(InvariantError, match="has no event"):
        check_events(tasks, _without(sched, {wait.id}))


def test_a_redundant_wait_is_caught():
    tasks = dag({1: (0,), 2: (1,), 3: (0, 2)})     # k2's wait on k1 also orders k0 before k3
    sched = insert_events(tasks, [0, 0, 1, 1])
    assert sched.num_events == 1
    # a second wait on k1's record, before k3, adds nothing
    rec = next(t for t in sched.order if t.kind is TaskKind.EVENT_RECORD)
    extra = EventTask(len(sched.order), TaskKind.EVENT_WAIT, "wait k1 again", 1, rec.event, rec.id)
    order = list(sched.order)
    order.insert([t.id for t in order].index(3), extra)
    streams = [list(s) for s in sched.streams]
    streams[1].insert([t.id for t in streams[1]].index(3), extra)
    bad = replace(sched, order=order, streams=streams, stream_of=[*sched.stream_of, 1])
    with pytest.raises(InvariantError, match="implied by the other waits"):
        check_events(tasks, bad)


def test_a_wait_that_names_the_wrong_record_is_caught():
    tasks = dag(DIAMOND)
    sched = insert_events(tasks, [0, 0, 1, 0])
    wait = next(t for t in sched.order if t.kind is TaskKind.EVENT_WAIT)
    wrong = replace(wait, record=wait.record + 1)
    order = [wrong if t is wait else t for t in sched.order]
    with pytest.raises(InvariantError, match="names record"):
        check_events(tasks, replace(sched, order=order))


def test_a_forward_dependency_is_caught():
    tasks = dag(DIAMOND)
    with pytest.raises(InvariantError, match="depends on later tasks"):
        check_tasks(replace(tasks, deps={**tasks.deps, 0: {3}}))


def _plan(tasks, sched, offsets: dict[str, int]) -> MemoryPlan:
    sizes = {f"t{i}": 4096 for i in range(len(tasks.tasks))}
    items = list(lifetimes(tasks, sched, sizes).values())
    entries = [PlanEntry(it.name, offsets[it.name], 4096, "activation", it.first, it.last, it.stream) for it in items]
    return MemoryPlan(entries, {"activation": 8192, "io": 0, "weight": 0}, 0, 0, None, items)


def test_parallel_buffers_sharing_bytes_are_caught():
    tasks = dag(DIAMOND)
    sched = insert_events(tasks, [0, 0, 1, 0])
    graph = state(tasks).graph
    check_memory(graph, tasks, sched, _plan(tasks, sched, {"t0": 0, "t1": 4096, "t2": 8192, "t3": 0}))
    with pytest.raises(InvariantError, match="'t1' and 't2' share bytes"):   # k1 and k2 run side by side
        check_memory(graph, tasks, sched, _plan(tasks, sched, {"t0": 0, "t1": 4096, "t2": 4096, "t3": 8192}))


class _Breaks(Pass):
    name = "breaks"

    def call(self, state):
        return PassResult(state, True)

    def ensures(self, state):
        raise InvariantError("broken on purpose")


def test_contracts_run_only_when_switched_on(monkeypatch):
    s = state(dag(DIAMOND), streams=2)
    monkeypatch.setattr(base, "CHECK_CONTRACTS", False)
    PassManager([StreamAssignment(), _Breaks()]).run(s)
    monkeypatch.setattr(base, "CHECK_CONTRACTS", True)
    with pytest.raises(InvariantError) as info:
        PassManager([StreamAssignment(), _Breaks()]).run(s)
    assert info.value.__notes__ == ["in pass 'breaks' after ['streams']"]


def test_the_tests_run_with_contracts_on():
    assert base.CHECK_CONTRACTS
