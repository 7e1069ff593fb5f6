"""Offsets in the activation pool: several greedy heuristics, the best one kept.

As GE's hybrid assigner does, each heuristic orders the tensors differently and places
each at the best-fitting gap among the already placed tensors it conflicts with; the
smallest pool wins. Two tensors conflict unless one's every use happens before the
other's write in the schedule, so sharing never depends on timing luck.
"""

from __future__ import annotations

from typing import Callable

import networkx as nx

from graphexec.passes.events import Schedule
from graphexec.passes.lifetimes import Lifetime, ordered

Order = Callable[[Lifetime, int], tuple]  # (item, number of items it conflicts with) -> sort key

HEURISTICS: dict[str, Order] = {
    "greedy_by_size": lambda x, d: (-x.size, x.first, x.name),         # TFLite arena, Pisarchyk & Lee
    "size_then_last_use": lambda x, d: (-x.size, -x.last, x.name),     # long-lived first among equals
    "first_use": lambda x, d: (x.first, -x.size, x.name),              # what an online allocator sees
    "most_conflicts": lambda x, d: (-d, -x.size, x.name),              # hardest to place first
    "longest_lived": lambda x, d: (-(x.last - x.first + 1) * x.size, x.first, x.name),
}


def conflicts(items: list[Lifetime], schedule: Schedule) -> list[list[int]]:
    """For each item, the indices of the items it may be live together with."""
    single = len(schedule.streams) == 1
    out: list[list[int]] = [[] for _ in items]
    by_first = sorted(range(len(items)), key=lambda i: items[i].first)
    for k, i in enumerate(by_first):
        a = items[i]
        for j in by_first[k + 1:]:
            b = items[j]
            if single:
                if b.first > a.last:
                    break  # later items start later still: none conflicts with a
                clash = True
            else:
                clash = not (ordered(a, b, schedule) or ordered(b, a, schedule))
            if clash:
                out[i].append(j)
                out[j].append(i)
    return out


def best_fit(items: list[Lifetime], clash: list[list[int]], order: Order) -> tuple[list[int], int]:
    """Place items in ``order``, each at the smallest gap that fits among its placed conflicts."""
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


def place_hybrid(items: list[Lifetime], schedule: Schedule,
                 clash: list[list[int]] | None = None) -> tuple[dict[str, int], int, str]:
    """Offsets by every heuristic; keep the smallest pool (ties: the first heuristic)."""
    clash = conflicts(items, schedule) if clash is None else clash
    best: tuple[int, str, list[int]] | None = None
    for name, order in HEURISTICS.items():
        offsets, peak = best_fit(items, clash, order)
        if best is None or peak < best[0]:
            best = (peak, name, offsets)
    if best is None:
        return {}, 0, "none"
    peak, name, offsets = best
    return {it.name: o for it, o in zip(items, offsets)}, peak, name
