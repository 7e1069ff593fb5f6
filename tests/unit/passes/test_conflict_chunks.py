"""Best fit stopped at a cap against the plain form in test_pass_fast_paths (a capped
placement is the full one or provably no better), and the array conflict search's empty
cases; the search in small chunks is test_pass_fast_paths' conflicts test."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from test_pass_fast_paths import CASES, _items, _schedules, ref_best_fit

from graphexec.passes import pool_offsets as po


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
