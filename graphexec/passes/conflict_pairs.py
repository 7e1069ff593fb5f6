"""The conflicting tensor pairs of a schedule, found with array operations.

Of two tensors, the one written later in launch order (b) conflicts with the other (a)
unless every writer of b knows a's last uses. Along one stream the clocks only grow, so
the writers that know a form a suffix of that stream: per (tensor, stream) only the
tasks between a's write and that suffix can conflict. A stream is a candidate for a
tensor when some of its tasks launch at or after the write and its first task does not
know every use yet; a need on another stream is found by bisecting the checkpoints of
the candidate stream (their entries only grow). Every step is a numpy operation over all
(tensor, stream) candidates at once: the loop over tensors and streams in Python cost
0.6 s of a 50,000-node graph's compile. The cells handled at once are bounded
(``CHUNK``), so a dense conflict graph stops at the pair budget without listing them all.
"""

from __future__ import annotations

from typing import Iterator

import numpy as np

from graphexec.plan.lifetimes import Lifetime
from graphexec.plan.schedule import Schedule

CHUNK = 1 << 22   # cells of the (use x stream) and pair arrays at once


class TooDense(Exception):
    """The conflict graph is too dense to list; per-stream lanes are planned instead."""


class _Layout:
    """The pool's streams end to end: per global position its launch key and the items
    its task writes (CSR); per stream its checkpoints as sorted keys (``_columns``)."""

    def __init__(self, schedule: Schedule, pool: list[int], items: list[Lifetime]) -> None:
        ids = np.array([t.id for t in schedule.order], dtype=np.int64)
        q_of = np.full(len(schedule.streams), -1, dtype=np.int64)
        q_of[np.array(pool, dtype=np.int64)] = np.arange(len(pool))
        q = q_of[np.array(schedule.stream_of, dtype=np.int64)[ids]]
        launch = np.flatnonzero(q >= 0)
        by_stream = np.argsort(q[launch], kind="stable")   # stream-major, launch order within
        launch, ids, q = launch[by_stream], ids[launch[by_stream]], q[launch[by_stream]]
        self.big = big = len(schedule.order) + 2   # past every launch index and every clock entry
        self.keys = q * big + launch
        g_of = np.full(len(schedule.stream_of), -1, dtype=np.int64)   # task id -> global position
        g_of[ids] = np.arange(len(ids))
        w_task = np.array([w for it in items for w in it.writers], dtype=np.int64)
        w_item = np.repeat(np.arange(len(items)), [len(it.writers) for it in items])
        g = g_of[w_task]
        on = g >= 0
        by_pos = np.argsort(g[on], kind="stable")
        self.witems = w_item[on][by_pos]    # the items each position's task writes, position by position
        self.wptr = np.concatenate([[0], np.cumsum(np.bincount(g[on], minlength=len(ids)))]).astype(np.int64)
        self.n = np.array([len(schedule.streams[s]) for s in pool], dtype=np.int64)
        self.base = np.concatenate([[0], np.cumsum(self.n)[:-1]]).astype(np.int64)
        self.pool = np.array(pool, dtype=np.int64)
        self.width = len(schedule.streams)
        self._columns(schedule, pool)

    def _columns(self, schedule: Schedule, pool: list[int]) -> None:
        """Checkpoint values of stream ``pool[q]`` about stream t as one sorted key array
        (column q * width + t), with where each column starts and each checkpoint's position."""
        width, big = self.width, self.big
        blocks: list[np.ndarray] = []
        starts: list[np.ndarray] = []
        ats: list[int] = []
        at_base: list[int] = []
        k = 0
        entry = np.zeros((len(pool), width), dtype=np.int64)
        total = 0
        for q, s in enumerate(pool):
            at, table = schedule.clock.table(s)
            entry[q] = schedule.clock.entry(s)
            entry[q, s] = 0
            cols = (q * width + np.arange(width, dtype=np.int64)) * big
            blocks.append((table.T + cols[:, None]).ravel())
            starts.append(total + np.arange(width, dtype=np.int64) * len(at))
            at_base.append(k)
            ats += at
            total += width * len(at)
            k += len(at)
        self.colkeys = np.concatenate(blocks) if blocks else np.zeros(0, dtype=np.int64)
        self.colstart = np.concatenate(starts) if starts else np.zeros(0, dtype=np.int64)
        self.at = np.array(ats + [0], dtype=np.int64)   # one spare: indexed before masking
        self.at_base = np.array(at_base, dtype=np.int64)
        self.count = np.diff(np.append(self.at_base, k))   # checkpoints per stream
        self.entry = entry
        ends = np.append(self.keys, 0)[np.maximum(self.base + self.n - 1, 0)] - np.arange(len(pool)) * big
        self.last = np.where(self.n > 0, ends, -1)   # the launch index of each stream's last task

    def first_knowing(self, q: np.ndarray, t: np.ndarray, e: np.ndarray) -> np.ndarray:
        """Per query, the first position of stream ``pool[q]`` whose clock passes position
        ``e`` (>= 0) of stream ``t`` (its length when none does)."""
        own = self.pool[q] == t
        col = q * self.width + t
        k = np.searchsorted(self.colkeys, col * self.big + e, side="right") - self.colstart[col]
        inside = k < self.count[q]
        p = np.where(inside, self.at[self.at_base[q] + np.where(inside, k, 0)], self.n[q])
        return np.where(own, e + 1, p)


def conflict_pairs(items: list[Lifetime], schedule: Schedule, budget: int | None = None,
                   streams: list[int] | None = None) -> list[list[int]]:
    """For each item, the sorted indices of the items it may be live together with
    (``streams``: only writers on these; past ``budget`` pairs: TooDense)."""
    pool = list(range(len(schedule.streams))) if streams is None else list(streams)
    if not items or not pool:
        return [[] for _ in items]
    lay = _Layout(schedule, pool, items)
    firsts = np.array([it.first for it in items], dtype=np.int64)
    later = bool(np.all(firsts[1:] >= firsts[:-1]))   # listed in launch order: later <=> larger index
    uses = _uses(items)
    ptr = uses[3]
    rows: list[np.ndarray] = []
    cols: list[np.ndarray] = []
    found = 0
    step = max(1, CHUNK // len(pool))
    a = 0
    while a < len(items):   # blocks of items with at most ``step`` uses each
        b = max(a + 1, int(np.searchsorted(ptr, ptr[a] + step, side="right")) - 1)
        for r, c in _block(lay, firsts, later, uses, a, b):
            rows.append(r)
            cols.append(c)
            found += len(r)
            if budget is not None and found > budget:
                raise TooDense(f"more than {budget} conflicting pairs")
        a = b
    return _symmetric(len(items), np.concatenate(rows) if rows else np.zeros(0, np.int64),
                      np.concatenate(cols) if cols else np.zeros(0, np.int64))


def _uses(items: list[Lifetime]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The items' last uses (item, stream, position), positions >= 0 only, grouped by item,
    and where each item's start (CSR pointer, one longer than the items)."""
    ends = [x.end for x in items]
    flat = np.array([u for e in ends for u in e], dtype=np.int64).reshape(-1, 2)
    item = np.repeat(np.arange(len(items), dtype=np.int64), [len(e) for e in ends])
    keep = flat[:, 1] >= 0   # a use at -1 is known by every clock
    item = item[keep]
    ptr = np.concatenate([[0], np.cumsum(np.bincount(item, minlength=len(items)))]).astype(np.int64)
    return item, flat[keep, 0], flat[keep, 1], ptr


def _block(lay: _Layout, firsts: np.ndarray, later: bool, uses: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
           a: int, b: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """The pairs (earlier item, later-written item) of items a..b-1, a bounded array at a time."""
    ne_item, ne_t, ne_e, ptr = uses
    u0, u1 = ptr[a], ptr[b]
    it, t, e = ne_item[u0:u1], ne_t[u0:u1], ne_e[u0:u1]
    width = len(lay.pool)
    cand = (lay.entry[:, t] <= e) & (lay.last[:, None] >= firsts[it])   # streams x uses
    q, r = np.nonzero(cand)
    if not len(q):
        return
    pi, pq = np.divmod(_distinct(it[r] * width + q), width)   # candidate (item, stream) pairs
    lo = np.searchsorted(lay.keys, pq * lay.big + firsts[pi], side="left") - lay.base[pq]
    cnt = ptr[pi + 1] - ptr[pi]   # every use of the item, per pair (at least the one making it a candidate)
    heads = np.cumsum(cnt) - cnt
    use = np.repeat(ptr[pi] - heads, cnt) + np.arange(int(cnt.sum()))
    p = lay.first_knowing(np.repeat(pq, cnt), ne_t[use], ne_e[use])
    hi = np.minimum(np.maximum(np.maximum.reduceat(p, heads), lo), lay.n[pq])
    start = lay.wptr[lay.base[pq] + lo]
    count = lay.wptr[lay.base[pq] + hi] - start
    keep = count > 0
    pi, start, count = pi[keep], start[keep], count[keep]
    ends = np.cumsum(count)
    k = 0
    while k < len(count):
        stop = max(k + 1, int(np.searchsorted(ends, (ends[k - 1] if k else 0) + CHUNK, side="right")))
        c = count[k:stop]
        col = lay.witems[np.repeat(start[k:stop] - (np.cumsum(c) - c), c) + np.arange(int(c.sum()))]
        row = np.repeat(pi[k:stop], c)
        if later:
            mask = col > row
        else:
            fr, fc = firsts[row], firsts[col]
            mask = (fc > fr) | ((fc == fr) & (col > row))
        yield row[mask], col[mask]
        k = stop


def _symmetric(n: int, rows: np.ndarray, cols: np.ndarray) -> list[list[int]]:
    """Per item, the sorted distinct items it is paired with in either direction."""
    if not len(rows):
        return [[] for _ in range(n)]
    keys = _distinct(np.concatenate([rows * n + cols, cols * n + rows]))   # a pair found twice counts once
    heads, tails = np.divmod(keys, n)
    bounds = np.searchsorted(heads, np.arange(n + 1)).tolist()
    flat = tails.tolist()
    return [flat[bounds[k]:bounds[k + 1]] for k in range(n)]


def _distinct(keys: np.ndarray) -> np.ndarray:
    """The sorted distinct keys (np.unique's hash path was 20x slower than a sort here)."""
    keys = np.sort(keys)
    return keys[np.concatenate([[True], keys[1:] != keys[:-1]])]
