"""Sparse vector clocks against happens-before counted on the sync graph itself."""

from __future__ import annotations

import networkx as nx
import numpy as np
from dags import random_dag
from hypothesis import given, settings
from hypothesis import strategies as st
from schedule_checks import sync_graph

import graphexec as gx
from graphexec.passes.event_insertion import insert_events, physical_streams


def _dense_oracle(schedule) -> dict[int, list[int]]:
    """clock[task][s] = how many tasks of stream s are ancestors of ``task``."""
    g, _ = sync_graph(schedule)
    n = len(schedule.streams)
    stream = schedule.stream_of
    out = {}
    for t in schedule.order:
        counts = [0] * n
        for a in nx.ancestors(g, t.id):
            counts[stream[a]] += 1
        out[t.id] = counts
    return out


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(2, 80), streams=st.integers(1, 5), split=st.integers(2, 12))
def test_sparse_clocks_equal_ancestor_counts(seed, n, streams, split):
    rng = np.random.default_rng(seed)
    tasks = gx.Session(random_dag(rng, n)).compile(None).tasks
    stream_of = [int(rng.integers(0, streams)) for _ in tasks.tasks]
    stream_of = physical_streams(stream_of, tasks, 27 + 3 * split)   # long streams split, as GE does
    sched = insert_events(tasks, stream_of)
    oracle = _dense_oracle(sched)
    for t in sched.order:
        assert list(sched.clock[t.id]) == oracle[t.id]
        for u in sched.order:
            assert sched.before(u, t) == (u.id != t.id and oracle[t.id][sched.stream_of[u.id]] > sched.pos[u.id])


def test_clock_width_does_not_grow_with_the_task_count():
    """A chain split into many streams keeps one merged clock per wait, not per task."""
    rng = np.random.default_rng(0)
    tasks = gx.Session(random_dag(rng, 400)).compile(None).tasks
    stream_of = physical_streams([0] * len(tasks.tasks), tasks, 27 + 3 * 10)
    sched = insert_events(tasks, stream_of)
    stored = sum(len(cp) for cps in sched.clock._cp for cp in cps)
    assert len(sched.streams) >= 30 and stored < len(tasks.tasks) * len(sched.streams) / 4


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(2, 80), streams=st.integers(1, 5), split=st.integers(2, 12))
def test_first_knowing_by_bisection_equals_a_scan_of_knows(seed, n, streams, split):
    """The memory planner's bisection over checkpoints (all queries at once, as arrays)
    finds the first task of a stream that knows a position, as a scan calling
    ``Clocks.knows`` task by task does."""
    from graphexec.passes.conflict_pairs import _Layout

    rng = np.random.default_rng(seed)
    tasks = gx.Session(random_dag(rng, n)).compile(None).tasks
    stream_of = physical_streams([int(rng.integers(0, streams)) for _ in tasks.tasks], tasks, 27 + 3 * split)
    sched = insert_events(tasks, stream_of)
    sizes = [len(s) for s in sched.streams]
    layout = _Layout(sched, list(range(len(sizes))), [])
    used = [s for s, k in enumerate(sizes) if k]   # a stream number may go unused
    queries = [(q, int(t), int(rng.integers(0, sizes[t]))) for t in rng.choice(used, size=40)
               for q in range(len(sizes))]
    q, t, e = (np.array(c, dtype=np.int64) for c in zip(*queries))
    found = layout.first_knowing(q, t, e).tolist()
    for (s, other, pos), got in zip(queries, found):
        ids = [x.id for x in sched.streams[s]]
        assert got == next((p for p in range(len(ids)) if sched.clock.knows(ids[p], [(other, pos)])), len(ids))
