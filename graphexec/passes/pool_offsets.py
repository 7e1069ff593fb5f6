"""Offsets in the activation pool: several greedy heuristics, the best one kept.

As GE's hybrid assigner does, each heuristic orders the tensors differently and places
each at the best-fitting gap among the already placed tensors it conflicts with; the
smallest pool wins. Two tensors conflict unless one's every use happens before the
other's write in the schedule, so sharing never depends on timing luck.
"""

from __future__ import annotations

from typing import Callable

import networkx as nx

from graphexec.passes.conflict_pairs import TooDense, conflict_pairs
from graphexec.plan.lifetimes import Lifetime
from graphexec.plan.schedule import Schedule

Order = Callable[[Lifetime, int], tuple]  # (item, number of items it conflicts with) -> sort key

HEURISTICS: dict[str, Order] = {
    "greedy_by_size": lambda x, d: (-x.size, x.first, x.name),         # TFLite arena, Pisarchyk & Lee
    "size_then_last_use": lambda x, d: (-x.size, -x.last, x.name),     # long-lived first among equals
    "first_use": lambda x, d: (x.first, -x.size, x.name),              # what an online allocator sees
    "most_conflicts": lambda x, d: (-d, -x.size, x.name),              # hardest to place first
    "longest_lived": lambda x, d: (-(x.last - x.first + 1) * x.size, x.first, x.name),
}


PAIR_BUDGET = 3_000_000  # beyond this many conflicting pairs, plan one lane per stream


def conflicts(items: list[Lifetime], schedule: Schedule, budget: int | None = None,
              streams: list[int] | None = None) -> list[list[int]]:
    """For each item, the indices of the items it may be live together with: two tensors
    conflict unless every writer of the one written later knows the other's last uses
    (``conflict_pairs.py``; ``streams``: only writers on those; past ``budget`` pairs,
    TooDense)."""
    return conflict_pairs(items, schedule, budget, streams)


def best_fit(items: list[Lifetime], clash: list[list[int]], order: Order,
             cap: int | None = None) -> tuple[list[int], int]:
    """Place items in ``order``, each at the smallest gap that fits among its placed conflicts.
    With ``cap``, stop once the pool reaches ``cap`` bytes (the peak only grows, so such a
    plan cannot beat one of ``cap``): the offsets are then partial and the peak is >= cap."""
    offsets = [-1] * len(items)
    sizes = [it.size for it in items]
    peak = 0
    stop = cap if cap is not None else -1
    keys = [order(it, len(c)) for it, c in zip(items, clash)]   # one call per item, not two
    for i in sorted(range(len(items)), key=keys.__getitem__):
        size = sizes[i]
        live = sorted([(offsets[j], sizes[j]) for j in clash[i] if offsets[j] >= 0])
        best, best_gap, cursor = -1, -1, 0
        for o, sz in live:
            gap = o - cursor
            if gap >= size and (best_gap < 0 or gap < best_gap):
                best, best_gap = cursor, gap
            if o + sz > cursor:
                cursor = o + sz
        at = offsets[i] = cursor if best < 0 else best
        if at + size > peak:
            peak = at + size
            if peak >= stop >= 0:
                break
    return offsets, peak


def cut_bound(items: list[Lifetime], clash: list[list[int]], limit: int = 3000) -> int | None:
    """The most bytes of tensors that may all be live together (a maximum-weight clique of
    the conflict graph): no plan that is safe for every timing of the schedule does better.
    With one stream it is the launch-order live peak; None when the graph is too big."""
    if len(items) > limit:
        return None
    g = nx.Graph()
    g.add_nodes_from((i, {"weight": it.size}) for i, it in enumerate(items))
    g.add_edges_from((i, j) for i, cl in enumerate(clash) for j in cl if i < j)
    return int(nx.max_weight_clique(g)[1]) if items else 0


def live_peak(items: list[Lifetime]) -> int:
    """Most bytes live at once when the tasks run one at a time in launch order: a lower bound
    of every safe plan (that run is one timing, and tensors live together in it conflict)."""
    deltas: dict[int, int] = {}
    for it in items:
        size, first, last = it.size, it.first, it.last
        deltas[first] = deltas.get(first, 0) + size
        deltas[last + 1] = deltas.get(last + 1, 0) - size
    peak = cur = 0
    for k in sorted(deltas):
        cur += deltas[k]
        peak = max(peak, cur)
    return peak


def place_hybrid(items: list[Lifetime], schedule: Schedule,
                 clash: list[list[int]] | None = None) -> tuple[dict[str, int], int, str]:
    """Offsets by every heuristic; keep the smallest pool (ties: the first heuristic). One
    that reaches the launch-order live peak cannot be beaten: the rest are not tried."""
    clash = conflicts(items, schedule) if clash is None else clash
    floor = live_peak(items)
    best: tuple[int, str, list[int]] | None = None
    for name, order in HEURISTICS.items():   # one that reaches the best pool so far stops: it cannot win
        offsets, peak = best_fit(items, clash, order, None if best is None else best[0])
        if best is None or peak < best[0]:
            best = (peak, name, offsets)
        if peak <= floor:
            break
    if best is None:
        return {}, 0, "none"
    peak, name, offsets = best
    return {it.name: o for it, o in zip(items, offsets)}, peak, name


def _lanes(items: list[Lifetime], schedule: Schedule) -> dict[int, list[int]]:
    """Items by the stream that writes them; -1 for items written from several streams."""
    stream_of = schedule.stream_of
    lanes: dict[int, list[int]] = {}
    for i, it in enumerate(items):
        writers = {stream_of[w] for w in it.writers}
        lanes.setdefault(writers.pop() if len(writers) == 1 else -1, []).append(i)
    return lanes


def plan_offsets(items: list[Lifetime], schedule: Schedule) -> tuple[dict[str, int], int, str, list | None]:
    """Offsets, pool size, the heuristic that won, and the conflict lists (None in lanes).

    When streams hardly synchronize, nearly every pair of tensors on different streams
    conflicts and listing them is quadratic; then each stream gets a lane of its own
    (tinygrad keeps one per copy queue for the same reason), reuse happens within a lane
    only, and tensors written from several streams get bytes of their own.
    """
    try:
        clash = conflicts(items, schedule, budget=PAIR_BUDGET)
    except TooDense:
        offsets: dict[str, int] = {}
        base = 0
        for stream, idx in sorted(_lanes(items, schedule).items()):
            sub = [items[i] for i in idx]
            if stream < 0:
                lane = {it.name: sum(x.size for x in sub[:k]) for k, it in enumerate(sub)}
                peak = sum(x.size for x in sub)
            else:
                lane, peak, _ = place_hybrid(sub, schedule, conflicts(sub, schedule, streams=[stream]))
            offsets.update({k: base + v for k, v in lane.items()})
            base += peak + (-peak) % 512
        return offsets, base, "per-stream lanes", None
    offsets, peak, name = place_hybrid(items, schedule, clash)
    return offsets, peak, name, clash
