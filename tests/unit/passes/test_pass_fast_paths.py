"""The compile fast paths against the plain algorithms they replaced, kept here as references.

Clocks as numpy rows against the dict-per-checkpoint clocks, the pair-list conflict
search against the set-per-item one, the best-fit placement against its first form: on
random DAGs with long streams split, the results must be equal, not merely both valid.
"""

from __future__ import annotations

import bisect

import numpy as np
import pytest
from dags import random_dag
from hypothesis import given, settings
from hypothesis import strategies as st

import graphexec as gx
import graphexec.passes.event_insertion as ei
from graphexec.passes import conflict_pairs as cp
from graphexec.passes import pool_offsets as po
from graphexec.plan.lifetimes import lifetimes
from graphexec.plan.memory import align


class DictClocks:
    """The reference: each checkpoint a dict of the streams it knows (the session-start code)."""

    def __init__(self, n_streams):
        self.n = n_streams
        self.stream, self.pos = {}, {}
        self._len = [0] * n_streams
        self._at = [[] for _ in range(n_streams)]
        self._cp = [[] for _ in range(n_streams)]
        self._cur = [{} for _ in range(n_streams)]

    def add(self, task, stream):
        self.stream[task] = stream
        self.pos[task] = self._len[stream]
        self._len[stream] += 1

    def current(self, stream, s):
        return self._len[stream] if s == stream else self._cur[stream].get(s, 0)

    def merge_after(self, stream, task):
        cur = self._cur[stream]
        src, p = self.stream[task], self.pos[task]
        grown = [(s, v) for s, v in self._checkpoint(src, p).items() if s != src and v > cur.get(s, 0)]
        if p + 1 > cur.get(src, 0):
            grown.append((src, p + 1))
        if not grown:
            return
        merged = dict(cur)
        merged.update(grown)
        self._cur[stream] = merged
        at = self._len[stream]
        if self._at[stream] and self._at[stream][-1] == at:
            self._cp[stream][-1] = merged
        else:
            self._at[stream].append(at)
            self._cp[stream].append(merged)

    def _checkpoint(self, s, p):
        k = bisect.bisect_right(self._at[s], p) - 1
        return self._cp[s][k] if k >= 0 else {}

    def get(self, task, s):
        own = self.stream[task]
        if s == own:
            return self.pos[task]
        return self._checkpoint(own, self.pos[task]).get(s, 0)

    def knows(self, task, need):
        own, p = self.stream[task], self.pos[task]
        cp = self._checkpoint(own, p)
        return all((p if s == own else cp.get(s, 0)) > e for s, e in need)


def ref_conflicts(items, schedule, budget=None, streams=None):
    """The reference conflict lists: every candidate writer scanned, a set per item (the
    task-by-task ``knows`` scan instead of the bisection, which test_clocks checks)."""
    clock = schedule.clock
    launch = {t.id: i for i, t in enumerate(schedule.order)}
    per_stream = [[t.id for t in s] for s in schedule.streams]
    written = {}
    for j, it in enumerate(items):
        for w in it.writers:
            written.setdefault(w, []).append(j)
    pool = range(len(per_stream)) if streams is None else streams
    out = [set() for _ in items]
    pairs = 0
    for i, a in enumerate(items):
        need = list(a.end)
        for s in pool:
            ids = per_stream[s]
            lo = bisect.bisect_left([launch[t] for t in ids], a.first)
            if lo == len(ids):
                continue
            hi = next((p for p in range(lo, len(ids)) if clock.knows(ids[p], need)), len(ids))
            for tid in ids[lo:hi]:
                for j in written.get(tid, ()):
                    if j != i and (items[j].first > a.first or (items[j].first == a.first and j > i)):
                        out[i].add(j)
                        out[j].add(i)
                        pairs += 1
            if budget is not None and pairs > budget:
                raise po.TooDense("budget")
    return [sorted(c) for c in out]


def ref_best_fit(items, clash, order):
    offsets = [-1] * len(items)
    peak = 0
    for i in sorted(range(len(items)), key=lambda i: order(items[i], len(clash[i]))):
        size = items[i].size
        live = sorted((offsets[j], items[j].size) for j in clash[i] if offsets[j] >= 0)
        best, best_gap, cursor = None, None, 0
        for o, sz in live:
            gap = o - cursor
            if gap >= size and (best_gap is None or gap < best_gap):
                best, best_gap = cursor, gap
            cursor = max(cursor, o + sz)
        offsets[i] = cursor if best is None else best
        peak = max(peak, offsets[i] + size)
    return offsets, peak


def _schedules(seed, n, streams, split, monkeypatch):
    """(tasks, the schedule with numpy clocks, the same schedule built with DictClocks)."""
    rng = np.random.default_rng(seed)
    compiled = gx.Session(random_dag(rng, n)).compile(None)
    tasks = compiled.tasks
    stream_of = ei.physical_streams([int(rng.integers(0, streams)) for _ in tasks.tasks], tasks, 27 + 3 * split)
    fast = ei.insert_events(tasks, stream_of)
    with monkeypatch.context() as m:
        m.setattr(ei, "Clocks", DictClocks)
        plain = ei.insert_events(tasks, stream_of)
    return compiled, fast, plain


CASES = dict(seed=st.integers(0, 10_000), n=st.integers(2, 90), streams=st.integers(1, 5), split=st.integers(2, 12))


@settings(max_examples=40, deadline=None)
@given(**CASES)
def test_row_clocks_equal_dict_clocks(seed, n, streams, split):
    with pytest.MonkeyPatch.context() as mp:
        _, fast, plain = _schedules(seed, n, streams, split, mp)
    assert [t.id for t in fast.order] == [t.id for t in plain.order]
    assert fast.clock._at == plain.clock._at and fast.pos == plain.pos
    width = len(fast.streams)
    for t in fast.order:
        assert [fast.clock.get(t.id, s) for s in range(width)] == [plain.clock.get(t.id, s) for s in range(width)]
    for s in range(width):   # what a stream's first task knows, its own entry aside
        row = fast.clock.entry(s)
        assert {k: int(v) for k, v in enumerate(row) if v and k != s} == \
            {k: v for k, v in plain.clock._checkpoint(s, 0).items() if k != s}


def _items(compiled, schedule):
    graph, tasks = compiled.graph, compiled.tasks
    sizes = {t.writes[0]: align(max(graph.values[t.writes[0]].type.nbytes, 1))
             for t in tasks.tasks if t.writes and tasks.root(t.writes[0]) == t.writes[0]}
    return list(lifetimes(tasks, schedule, sizes).values())


@settings(max_examples=60, deadline=None)
@given(**CASES, budget=st.sampled_from([None, 0, 5, 40]), chunk=st.sampled_from([None, 1, 2, 7, 64]))
def test_conflicts_and_best_fit_equal_the_plain_search(seed, n, streams, split, budget, chunk):
    """``chunk``: the array search's cells at a time (blocks of one item's uses, pairs
    expanded a few at a time), or its default."""
    with pytest.MonkeyPatch.context() as mp:
        compiled, fast, plain = _schedules(seed, n, streams, split, mp)
    items = _items(compiled, fast)
    with pytest.MonkeyPatch.context() as mp:
        if chunk is not None:
            mp.setattr(cp, "CHUNK", chunk)
        _same_conflicts(items, fast, plain, budget)


def _same_conflicts(items, fast, plain, budget):
    try:
        ref = ref_conflicts(items, plain, budget)
    except po.TooDense:
        with pytest.raises(po.TooDense):
            po.conflicts(items, fast, budget)
        return
    assert po.conflicts(items, fast, budget) == ref
    lane = [0] if len(fast.streams) else None   # the per-stream form (lanes) too
    assert po.conflicts(items, fast, streams=lane) == ref_conflicts(items, plain, streams=lane)
    lanes = [s for s in range(len(fast.streams)) if s % 2]   # a pool of some streams only
    assert po.conflicts(items, fast, streams=lanes) == ref_conflicts(items, plain, streams=lanes)
    for order in po.HEURISTICS.values():
        assert po.best_fit(items, ref, order) == ref_best_fit(items, ref, order)


def test_conflicts_of_items_out_of_launch_order_equal_the_plain_search():
    """Items not listed in launch order of their writes take the general comparison."""
    with pytest.MonkeyPatch.context() as mp:
        compiled, fast, plain = _schedules(3, 60, 3, 4, mp)
    items = _items(compiled, fast)[::-1]
    assert any(a.first > b.first for a, b in zip(items, items[1:]))
    assert po.conflicts(items, fast) == ref_conflicts(items, plain)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(1, 60), device=st.sampled_from(["ascend910", "ascend310p"]))
def test_fastest_all_equals_fastest_us_task_by_task(seed, n, device):
    from graphexec.passes.makespan_bounds import fastest_all, fastest_us

    session = gx.Session(random_dag(np.random.default_rng(seed), n), device=device)
    tasks = session.compile(None).tasks.tasks
    assert fastest_all(tasks, session.profile) == [fastest_us(t, session.profile) for t in tasks]


@given(free=st.lists(st.sampled_from([0.0, 1.5, 2.0, 3.25, 7.0]), min_size=1, max_size=6),
       ready=st.sampled_from([0.0, 1.0, 2.0, 5.0, 9.0]))
def test_earliest_stream_equals_the_keyed_min(free, ready):
    from graphexec.passes.stream_policies import _earliest

    assert _earliest(free, ready) == min(range(len(free)), key=lambda k: (max(free[k], ready), k))


@given(chains=st.lists(st.tuples(st.integers(0, 12), st.integers(0, 12), st.integers(0, 3)), max_size=20),
       probe=st.integers(0, 14))
def test_flat_root_and_locate_equal_the_walk(chains, probe):
    """Flattened aliases answer root/locate in one step, as walking the chain does."""
    from graphexec.plan.tasks import TaskGraph, flatten_aliases

    alias, offset = {}, {}
    for a, b, off in chains:   # only edges to smaller names: no cycles
        if a > b and f"v{a}" not in alias:
            alias[f"v{a}"], offset[f"v{a}"] = f"v{b}", 512 * off
    flat = TaskGraph([], {}, *flatten_aliases(alias, offset))
    chained = TaskGraph([], {}, alias, offset)   # not flattened: root and locate walk the chain
    assert flat.flat
    name, off = f"v{probe}", 0
    cur = name
    while cur in alias:   # the reference: walk the chain, summing offsets
        off, cur = off + offset.get(cur, 0), alias[cur]
    assert flat.root(name) == chained.root(name) == cur
    assert flat.locate(name) == chained.locate(name) == (cur, off)


@given(shape=st.lists(st.integers(0, 4), max_size=3), others=st.integers(0, 3))
def test_equal_shapes_broadcast_to_themselves(shape, others):
    """The in-place check skips ``np.broadcast_shapes`` when every input has the output's shape."""
    want = tuple(shape)
    assert np.broadcast_shapes(*([want] * (others + 1))) == want


def test_shape_inference_types_equal_onnx_inference_read_one_by_one():
    """The inferred types, read once per distinct TypeProto, are those each value's own
    TypeProto gives."""
    import onnx

    from graphexec.ir.onnx_proto import tensor_type

    model = random_dag(np.random.default_rng(5), 60)
    compiled = gx.Session(model).compile(None)
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False, data_prop=True)
    for vi in inferred.graph.value_info:
        assert compiled.graph.values[vi.name].type == tensor_type(vi.type)
