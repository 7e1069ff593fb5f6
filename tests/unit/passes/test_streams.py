"""Stream policies and event insertion on random DAGs and the light models."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import graphexec as gx
from dags import random_dag
from graphexec.passes.event_insertion import insert_events
from graphexec.passes.stream_assignment import build_schedule
from graphexec.passes.stream_policies import chain_cover
from schedule_checks import check_events_minimal_and_sufficient, check_trace_order

POLICIES = ["ge", "chains", "list"]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), n=st.integers(2, 60), streams=st.sampled_from([2, 3, 4, 8]),
       policy=st.sampled_from(POLICIES))
def test_random_dags_match_one_stream(seed, n, streams, policy):
    rng = np.random.default_rng(seed)
    model = random_dag(rng, n)
    x = {"x": rng.standard_normal((8, 8)).astype(np.float32)}
    one = gx.Session(model).run(x)
    session = gx.Session(model, streams=streams, policy=policy)
    many = session.run(x)
    for k in one.outputs:
        assert one.outputs[k].tobytes() == many.outputs[k].tobytes()
    check_trace_order(many.trace)
    check_events_minimal_and_sufficient(session.compiled.tasks, session.compiled.schedule)
    assert many.stats.num_streams <= streams


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(2, 120), streams=st.integers(1, 6))
def test_random_stream_assignment_events_minimal(seed, n, streams):
    """Any assignment of streams (not just a policy's) gets sufficient, minimal waits."""
    rng = np.random.default_rng(seed)
    compiled = gx.Session(random_dag(rng, n)).compile(None)
    tasks = compiled.tasks
    stream_of = [int(rng.integers(0, streams)) for _ in tasks.tasks]
    sched = insert_events(tasks, stream_of)
    check_events_minimal_and_sufficient(tasks, sched)
    assert sched.stats["waits_after_pruning"] <= sched.stats["waits_before_pruning"]


def test_pruning_through_a_third_stream():
    """a(s0) -> b(s1) -> c(s2) and a -> c: the wait of c on a is implied through s1."""
    compiled = gx.Session(random_dag(np.random.default_rng(0), 3)).compile(None)
    tasks = compiled.tasks
    tasks = replace(tasks, deps={0: set(), 1: {0}, 2: {0, 1}})
    sched = insert_events(tasks, [0, 1, 2])
    assert sched.stats == {"waits_before_pruning": 3, "waits_after_pruning": 2}


def test_chain_cover_is_minimum_for_a_diamond():
    compiled = gx.Session(random_dag(np.random.default_rng(0), 4)).compile(None)
    tasks = compiled.tasks
    tasks = replace(tasks, deps={0: set(), 1: {0}, 2: {0}, 3: {1, 2}})
    cover = chain_cover(tasks)
    assert len(cover) == 2  # [0,1,3]+[2] or [0,2,3]+[1] or [0,1]+[2,3]: all minimum
    assert sorted(t for c in cover for t in c) == [0, 1, 2, 3]
    assert all(b in tasks.deps[c] for chain in cover for b, c in zip(chain, chain[1:]))


def test_long_stream_is_split_with_an_event():
    profile = gx.Session(random_dag(np.random.default_rng(0), 2)).profile
    small = profile.model_copy(update={"max_tasks_per_stream": 27 + 3 * 10})
    model = random_dag(np.random.default_rng(1), 45)
    session = gx.Session(model, device=small)
    x = {"x": np.ones((8, 8), np.float32)}
    r = session.run(x)
    assert r.stats.num_streams >= 4 and r.stats.num_events >= 1
    assert all(len([t for t in s if t.kind.name in ("KERNEL", "AICPU")]) <= 10 for s in session.compiled.schedule.streams)
    base = gx.Session(model).run(x)
    assert all(base.outputs[k].tobytes() == r.outputs[k].tobytes() for k in base.outputs)


def test_too_many_streams_is_an_error():
    with pytest.raises(gx.GraphExecError, match="streams=100000 exceeds the 2048 streams device ascend910 allows"):
        gx.Session(random_dag(np.random.default_rng(0), 3), streams=100000)


def test_unknown_policy():
    s = gx.Session(random_dag(np.random.default_rng(0), 3), streams=2, policy="magic")
    with pytest.raises(gx.GraphExecError, match="unknown stream policy 'magic'; known: single, ge, chains, list, auto"):
        s.compile(None)


def test_auto_never_slower_than_one_stream():
    model = random_dag(np.random.default_rng(3), 40)
    x = {"x": np.ones((8, 8), np.float32)}
    one = gx.Session(model).run(x).stats.makespan_us
    auto = gx.Session(model, streams="auto").run(x).stats.makespan_us
    assert auto <= one


@pytest.mark.parametrize("streams", [4, "auto"])
def test_auto_candidates_without_clocks_pick_the_plain_schedule(streams):
    """The auto search simulates its candidates without vector clocks and clocks the one it
    keeps: the same schedule, clocks and positions as building every candidate whole."""
    from graphexec import _switch

    model = random_dag(np.random.default_rng(5), 60)
    fast = gx.Session(model, streams=streams, policy="auto").compile(None).schedule
    with _switch.plain():
        plain = gx.Session(model, streams=streams, policy="auto").compile(None).schedule
    assert fast.policy == plain.policy and fast.stream_of == plain.stream_of and fast.stats == plain.stats
    assert [t.id for t in fast.order] == [t.id for t in plain.order]
    assert fast.pos == plain.pos and fast.clock.pos == plain.clock.pos
    assert all(fast.clock.get(t.id, s) == plain.clock.get(t.id, s)
               for t in fast.order for s in range(len(fast.streams)))


@pytest.mark.parametrize("seed", [5, 11])
def test_each_candidate_is_simulated_as_its_whole_schedule(seed):
    """The auto search simulates a candidate from its streams and event slots (no event
    task, no clocks): for every policy and limit its makespan is the one of the schedule
    made whole, and the schedule it keeps is that candidate's (same order, events, ids)."""
    from graphexec.passes import stream_assignment as sa
    from graphexec.passes.event_insertion import event_slots, events_schedule, prune_waits
    from graphexec.runtime.launch import simulate_makespan

    session = gx.Session(random_dag(np.random.default_rng(seed), 50), streams=4)
    tasks, profile = session.compile(None).tasks, session.profile
    for limit, policy in [(1, "single"), *((n, p) for n in (2, 4) for p in ("ge", "chains", "list"))]:
        stream_of = sa.assign(tasks, policy, limit, profile)
        waits, crossing = prune_waits(tasks, stream_of)
        slots = event_slots(tasks, stream_of, waits)
        whole = build_schedule(tasks, policy, limit, profile)
        assert sa._draft_span(tasks, stream_of, waits, slots, profile, True, {}) == simulate_makespan(whole, profile)
        made = events_schedule(tasks, stream_of, waits, crossing, policy, whole.priorities, slots=slots)
        assert [(t.id, t.name, getattr(t, "event", None)) for t in made.order] == \
            [(t.id, t.name, getattr(t, "event", None)) for t in whole.order]
        assert made.stream_of == whole.stream_of and made.num_event_ids == whole.num_event_ids


def test_candidates_share_kernel_times_and_task_weights():
    """The auto search's candidates share one table of kernel times (a task's time is the
    same on any stream) and the policies one list of weights; each makespan is the one
    worked out alone."""
    from graphexec.passes.makespan_bounds import fastest_all
    from graphexec.passes.stream_policies import _weights, shared_weights
    from graphexec.runtime import sim_core
    from graphexec.runtime.launch import simulate_makespan

    session = gx.Session(random_dag(np.random.default_rng(7), 40), streams=4)
    tasks, profile = session.compile(None).tasks, session.profile
    known: dict = {}
    for policy in POLICIES:
        sched = build_schedule(tasks, policy, 4, profile)
        assert simulate_makespan(sched, profile, True, known) == simulate_makespan(sched, profile)
    assert len(known) == (len(tasks.tasks) if sim_core.enabled() else 0)
    with shared_weights(tasks, profile):
        w = _weights(tasks, profile)
        assert _weights(tasks, profile) is w and w == fastest_all(tasks.tasks, profile)
    assert _weights(tasks, profile) is not w


def test_each_stream_label_gets_its_own_stream():
    model = random_dag(np.random.default_rng(2), 12)
    graph = gx.load(model)
    for i, node in enumerate(graph.nodes):
        node.meta["stream_label"] = "a" if i % 2 else "b"
    session = gx.Session(graph, streams=1)
    session.compile(None)
    streams = {t.node.meta["stream_label"]: set() for t in session.compiled.tasks.tasks}
    for t in session.compiled.tasks.tasks:
        streams[t.node.meta["stream_label"]].add(session.compiled.schedule.stream_of[t.id])
    assert all(len(s) == 1 for s in streams.values()) and streams["a"] != streams["b"]


def test_hand_written_schedule_and_options_are_honoured():
    from pathlib import Path

    path = Path(__file__).resolve().parents[3] / "models" / "article_streams.yaml"
    session = gx.Session(gx.load(path))
    compiled = session.compile(None)
    sched = compiled.schedule
    assert sched.policy == "manual" and len(sched.streams) == 2
    names = [[t.name for t in s if t.kind.name == "KERNEL"] for s in sched.streams]
    assert names[0] == ["pre_cast", "pre_center", "pre_scale", "pre_pool"]
    assert [t.kind.name for t in sched.streams[1]].index("EVENT_WAIT") == 3  # after main_fc2, before post_proj
    assert session.profile.name == "ascend910"
    assert gx.Session(gx.load(path), streams=1).compile(None).schedule.policy == "single"



def test_chain_cover_gives_networkx_a_frame_per_task(monkeypatch):
    """Hopcroft-Karp (networkx's, and its port ``_matching``) recurses once per task on an
    augmenting path: the 12,500-node layered graph of benchmarks/compile_scale.py on 4
    streams went past Python's default limit of 1,000 (RecursionError in the streams pass).
    chain_cover raises the limit by its task count around the call, and puts it back."""
    import sys

    import networkx as nx

    from graphexec import _switch
    from graphexec.passes import stream_policies as sp

    compiled = gx.Session(random_dag(np.random.default_rng(0), 30)).compile(None)
    seen = []

    def spy(matching):
        def call(*args, **kw):
            seen.append(sys.getrecursionlimit())
            return matching(*args, **kw)
        return call

    before = sys.getrecursionlimit()
    want = chain_cover(compiled.tasks)
    monkeypatch.setattr(sp, "_matching", spy(sp._matching))
    monkeypatch.setattr(nx.bipartite, "hopcroft_karp_matching", spy(nx.bipartite.hopcroft_karp_matching))
    assert chain_cover(compiled.tasks) == want
    with _switch.plain():
        assert chain_cover(compiled.tasks) == want
    assert seen == [before + len(compiled.tasks.tasks)] * 2 and sys.getrecursionlimit() == before
