"""The array conflict search in small chunks, and best fit stopped at a cap, against the
plain forms in test_pass_fast_paths (the search chunk by chunk must list the same pairs
and stop at the same budget; a capped placement is the full one or provably no better)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_pass_fast_paths import CASES, _items, _schedules, ref_best_fit, ref_conflicts

from graphexec.passes import conflict_pairs as cp
from graphexec.passes import pool_offsets as po


@settings(max_examples=30, deadline=None)
@given(**CASES, chunk=st.sampled_from([1, 2, 7, 64]), budget=st.sampled_from([None, 0, 3, 25]))
def test_chunked_search_equals_the_plain_search(seed, n, streams, split, chunk, budget):
    with pytest.MonkeyPatch.context() as mp:
        compiled, fast, plain = _schedules(seed, n, streams, split, mp)
        items = _items(compiled, fast)
        mp.setattr(cp, "CHUNK", chunk)   # blocks of one item's uses, pairs expanded a few at a time
        try:
            ref = ref_conflicts(items, plain, budget)
        except po.TooDense:
            with pytest.raises(po.TooDense):
                po.conflicts(items, fast, budget)
            return
        assert po.conflicts(items, fast, budget) == ref
        lanes = [s for s in range(len(fast.streams)) if s % 2]   # a pool of some streams only
        assert po.conflicts(items, fast, streams=lanes) == ref_conflicts(items, plain, streams=lanes)


@settings(max_examples=30, deadline=None)
@given(**CASES)
def test_capped_best_fit_is_the_full_one_or_no_better(seed, n, streams, split):
    with pytest.MonkeyPatch.context() as mp:
        compiled, fast, _ = _schedules(seed, n, streams, split, mp)
    items = _items(compiled, fast)
    clash = po.conflicts(items, fast)
    for order in po.HEURISTICS.values():
        full = ref_best_fit(items, clash, order)
        for cap in {full[1], full[1] + 1, max(1, full[1] // 2)}:
            offsets, peak = po.best_fit(items, clash, order, cap)
            if full[1] < cap:
                assert (offsets, peak) == full
            else:
                assert peak >= cap


def test_no_items_or_no_streams_have_no_conflicts():
    with pytest.MonkeyPatch.context() as mp:
        compiled, fast, _ = _schedules(1, 20, 2, 4, mp)
    items = _items(compiled, fast)
    assert po.conflicts([], fast) == []
    assert po.conflicts(items, fast, streams=[]) == [[] for _ in items]
