"""Event-id reuse with heaps against the sorted-list form it replaced, on random launch
orders of records and waits (ids freed after a logical event's last wait, smallest first)."""

from __future__ import annotations

import random

import pytest

from graphexec.passes.event_insertion import reuse_event_ids
from graphexec.plan.tasks import TaskKind


def plain_reuse(order):
    last_wait = {}
    for i, t in enumerate(order):
        if t is not None and t[0] is TaskKind.EVENT_WAIT:
            last_wait[t[1]] = i
    free, busy, logical_to_id, ids, n = [], [], {}, [], 0
    for i, t in enumerate(order):
        busy.sort()
        while busy and busy[0][0] < i:
            free.append(busy.pop(0)[1])
        if t is None:
            continue
        kind, event = t
        if kind is TaskKind.EVENT_RECORD:
            free.sort()
            eid = free.pop(0) if free else n
            n += eid == n
            logical_to_id[event] = eid
            busy.append((last_wait.get(event, i), eid))
        ids.append(logical_to_id[event])
    return ids


def _order(rng):
    """Kernels (None), records of fresh logical events and waits on recorded ones."""
    order, recorded = [], []
    for _ in range(rng.randrange(0, 120)):
        r = rng.random()
        if r < 0.3 or not recorded:
            order.append(None if r < 0.15 else (TaskKind.EVENT_RECORD, len(recorded)))
            if r >= 0.15:
                recorded.append(len(recorded))
        else:
            order.append((TaskKind.EVENT_WAIT, rng.choice(recorded[-6:])))
    return order


@pytest.mark.parametrize("seed", range(5))
def test_heap_reuse_equals_the_sorted_lists(seed):
    rng = random.Random(seed)
    for _ in range(300):
        order = _order(rng)
        assert reuse_event_ids(order) == plain_reuse(order)
