"""A run's stats from its finished tasks in a few array passes instead of a Python loop
per task and name (``result.make_stats`` uses it for a plan with no control flow).

The plain passes (``metrics.scan``, ``metrics.executed_live_peak``,
``counters.run_metrics``) walk the finished tasks and, for the live peak, each name a
kernel reads or writes: about 1.5 us per task, as much as a timing-only run's launches.
What they read of a kernel beyond its times is the plan's (unit, flops over the unit's
peak, bytes, the activation tensors it writes and reads), so :class:`StatsPlan` works it
out once per compiled plan; a run then gathers the kernels' times and finish order into
arrays and numpy does the rest. Every number is the plain passes' bit for bit: sums are
``np.cumsum`` (sequential, in the plain loop's order: finish order for the utilization,
time order for the queue-depth area, from the same 0.0), min, max, sorts and integer
sums are exact in any order, and the few sums Python's ``sum`` makes are made by it.

A run of up to ``WALK_MAX`` tasks (kernels, event records and waits) takes
``StatsPlan.walk`` instead: one Python walk over the finished tasks doing the plain
passes' operations in their order on the plan's per-kernel tuples. A timing-only run is
timed right after a compile, with the caches cold: then each numpy call, each extra
pass and each plan object read costs several times its warm price, and one walk that
reads a task once and a kernel's plan tuple once is the cheapest below a few hundred
tasks (measured in the first ``simulate`` of fresh sessions).
"""

from __future__ import annotations

from itertools import accumulate
from typing import Any

import numpy as np

from graphexec.engine.metrics import Utilization, _shares, _Sums, peak_of
from graphexec.profiling.counters import RunMetrics, _empty_time
from graphexec.profiling.counters import _area_peak as _series_area_peak

MIN_TASKS = 64   # fewer finished tasks: the plain passes cost less than numpy's calls (measured: 48-90)
WALK_MAX = 300   # finished tasks up to which ``StatsPlan.walk`` runs (more: the array passes; measured 260-500)
_NO_QUEUE: RunMetrics = {"mean_queue_depth": 0.0, "max_queue_depth": 0, "device_idle_us": 0.0, "host_wait_us": 0.0}


class StatsPlan:
    """What the stats read of a plan's kernels, as arrays by launch index (``Compiled._index``).

    ``roots`` are the activation tensors some kernel writes (``sizes`` their bytes);
    ``w_root``/``w_kernel`` pair each with its writers, grouped by root (``w_start`` the
    groups' offsets), ``r_root``/``r_kernel`` with its readers.
    """

    def __init__(self, kernels: list[Any], index: dict[int, int], sizes: dict[str, int], root: Any,
                 profile: Any) -> None:
        self.index = index
        self.n = len(kernels)
        sums = _Sums(profile)   # the same rates, from the same profile calls, as the plain scan's
        self.cube = np.array([k.unit == "cube" for k in kernels], dtype=bool)
        self.vector = np.array([k.unit == "vector" for k in kernels], dtype=bool)
        self.num_aicpu = sum(k.unit == "aicpu" for k in kernels)
        self.work = np.array([_work(sums, k, profile) for k in kernels], dtype=np.float64)
        self.bytes = np.array([float(k.bytes) for k in kernels], dtype=np.float64)
        w_roots = [root(name) for k in kernels for name in k.writes]
        self.roots = list(dict.fromkeys(r for r in w_roots if r in sizes))
        slot = {r: j for j, r in enumerate(self.roots)}
        self.sizes = np.array([sizes[r] for r in self.roots], dtype=np.int64)
        # (root slot, kernel) of every write to a root, grouped by slot in kernel order; every
        # read of a written root in kernel order (a tensor no kernel writes never lives)
        ws, w_of = _slots(slot, w_roots, [len(k.writes) for k in kernels])
        by_slot = np.argsort(ws, kind="stable")
        self.w_root, self.w_kernel = ws[by_slot].astype(np.int64), w_of[by_slot]
        counts = np.bincount(self.w_root, minlength=len(self.roots))
        self.w_start = np.cumsum(np.concatenate([[0], counts[:-1]])).astype(np.intp)
        self.r_root, self.r_kernel = _slots(slot, [root(name) for k in kernels for name in k.reads],
                                            [len(k.reads) for k in kernels])
        # for ``walk``, by launch index: the sum a kernel adds its work to (0 cube, 1 vector,
        # 2 none), its work and bytes, the roots (slots) it writes and the written ones it
        # reads; ``by_id`` finds a kernel's launch index by its Task object. A plan of more
        # kernels than a walk takes has none: no run short enough to walk finishes them all
        self.by_id: dict[int, int] = {}
        self.info: list[tuple[int, float, float, tuple[int, ...], tuple[int, ...]]] = []
        if self.n <= WALK_MAX:
            self.by_id = {id(k): i for i, k in enumerate(kernels)}
            self.info = [(0 if k.unit == "cube" else 1 if k.unit == "vector" else 2, w, b,
                          tuple(dict.fromkeys(slot[r] for r in map(root, k.writes) if r in slot)),
                          tuple(slot[r] for r in map(root, k.reads) if r in slot))
                         for k, w, b in zip(kernels, self.work.tolist(), self.bytes.tolist())]
        self.sizes_l = self.sizes.tolist()

    def walk(self, finished: list[Any], profile: Any) -> tuple[Any, ...] | None:
        """``make_stats``' numbers (makespan, kernel counts, utilization, live peak, queue
        metrics) of a run whose finished tasks are this plan's kernels, each once, and event
        records and waits, all started, in one walk over them (see the module doc); None
        for any other run (the caller takes the passes)."""
        if self.n > WALK_MAX:   # a walk's run cannot have finished every kernel
            return None
        by_id, info = self.by_id, self.info
        first: list[Any] = [None] * len(self.roots)
        last: list[Any] = [None] * len(self.roots)
        seen = bytearray(self.n)
        sums = [0.0, 0.0, 0.0]
        net: dict[float, float] = {}
        get = net.get
        start: list[float] = []
        end: list[float] = []
        moved, lo, hi = 0.0, float("inf"), float("-inf")
        for t in finished:
            s, e, q = t.start_t, t.end_t, t.enqueue_t
            if s is None:
                return None
            net[q] = get(q, 0.0) + 1.0
            net[e] = get(e, 0.0) - 1.0
            kind = t.kind
            if kind != "kernel":
                if kind != "record" and kind != "wait":
                    return None
                continue
            i = by_id.get(id(t.meta.get("task")), -1)   # -1: not a kernel of this plan
            if i < 0 or seen[i]:
                return None
            seen[i] = 1
            start.append(s)
            end.append(e)
            if s < lo:
                lo = s
            if e > hi:
                hi = e
            u, w, b, ws, rs = info[i]
            sums[u] += w
            moved += b
            for j in ws:
                f = first[j]
                if f is None:
                    first[j], last[j] = s, e
                    continue
                if s < f:
                    first[j] = s
                if e > last[j]:
                    last[j] = e
            for j in rs:
                f = last[j]
                if f is not None and e > f:
                    last[j] = e
        if len(start) != self.n:
            return None
        makespan = hi - lo if hi >= lo else 0.0
        acc = _Sums(profile)
        acc.work["cube"], acc.work["vector"], acc.moved = sums[0], sums[1], moved
        return (makespan, (self.n - self.num_aicpu, self.num_aicpu), _shares(acc, None, profile, makespan),
                _peak(first, last, self.sizes_l), _queue(start, end, lo, hi, net))

    def order(self, kernels: list[Any]) -> np.ndarray | None:
        """Launch indices of ``kernels`` (the run's finished kernel tasks, in finish order),
        or None unless they are this plan's kernels, each once."""
        if len(kernels) != self.n:
            return None
        try:
            ks = [self.index[t.meta["task"].id] for t in kernels]
        except (KeyError, AttributeError, TypeError):
            return None
        return np.array(ks, dtype=np.intp) if len(set(ks)) == self.n else None

    def live_peak(self, ks: np.ndarray, start: np.ndarray, end: np.ndarray) -> int:
        """``metrics.executed_live_peak``: ``start``/``end``/``ks`` in finish order."""
        if not len(self.roots):
            return 0
        rank = np.empty(self.n, dtype=np.intp)
        rank[ks] = np.arange(self.n)
        by_start, by_end = np.empty(self.n), np.empty(self.n)
        by_start[ks], by_end[ks] = start, end
        wk = self.w_kernel
        first = np.minimum.reduceat(by_start[wk], self.w_start)
        last = np.maximum.reduceat(by_end[wk], self.w_start)
        written = np.minimum.reduceat(rank[wk], self.w_start)   # finish rank of its first writer
        # a read counts once a writer has finished (it, or an earlier task in finish order)
        seen = written[self.r_root] <= rank[self.r_kernel]
        np.maximum.at(last, self.r_root[seen], by_end[self.r_kernel[seen]])
        times = np.concatenate([first, last])
        starts = np.concatenate([np.ones(len(first), np.int8), np.zeros(len(last), np.int8)])
        deltas = np.concatenate([self.sizes, -self.sizes])
        live = np.cumsum(deltas[np.lexsort((starts, times))])   # ends (0) before starts (1) at a time
        return max(0, int(live.max()))

    def utilization(self, ks: np.ndarray, profile: Any, makespan: float) -> Utilization:
        """``metrics.scan``'s utilization: the kernels' sums in finish order."""
        sums = _Sums(profile)
        cube, vector = self.cube[ks], self.vector[ks]
        work = self.work[ks]
        sums.work["cube"] = _fold(work[cube])
        sums.work["vector"] = _fold(work[vector])
        sums.moved = _fold(self.bytes[ks])
        return _shares(sums, None, profile, makespan)


def _slots(slot: dict[str, int], roots: list[str], per_kernel: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """(slot, kernel index) of each of ``roots`` that has a slot, in their order; the kernels
    name ``per_kernel[i]`` of them each, kernel by kernel."""
    of = np.repeat(np.arange(len(per_kernel), dtype=np.intp), per_kernel)
    s = np.array([slot.get(r, -1) for r in roots], dtype=np.intp)
    keep = s >= 0
    return s[keep], of[keep]


def _work(sums: _Sums, k: Any, profile: Any) -> float:
    """What ``_Sums.add`` adds to its unit's busy time for kernel ``k`` (0.0: none)."""
    rates = sums.peak.get(k.unit)
    if rates is None:
        return 0.0
    rate = rates.get(k.dtype)
    if rate is None:
        rate = rates[k.dtype] = profile.unit_rate(k.unit, k.dtype) * sums.cores[k.unit]
    return float(k.flops / rate)


def _fold(values: np.ndarray) -> float:
    """0.0 + v0 + v1 + ...: the plain loop's sum, in its order (``np.cumsum`` is sequential).
    Leaving out the leading 0.0 changes a partial sum only while it is zero (its sign), and
    the final ``+ 0.0`` gives that zero the plain loop's sign."""
    return float(values.cumsum()[-1]) + 0.0 if len(values) else 0.0


def window(done: list[Any], start: np.ndarray, end: np.ndarray) -> tuple[float, float]:
    """``metrics.scan``'s (lo, hi): the kernels' (``start``/``end``) and the copies' and
    control tasks' first start and last end (inf, -inf when there are none)."""
    lo, hi = float("inf"), float("-inf")
    if len(start):
        lo, hi = float(start.min()), float(end.max())
    for t in done:
        if t.kind == "memcpy" or t.kind == "control":
            lo, hi = min(lo, t.start_t), max(hi, t.end_t)
    return lo, hi


def run_metrics(done: list[Any], start: np.ndarray, end: np.ndarray) -> RunMetrics:
    """``counters.run_metrics(done)``: ``start``/``end`` are the kernels' times, ``done``
    every finished task (each has its end time)."""
    copies = [t for t in done if t.kind == "memcpy" and t.start_t is not None]
    if copies:
        start = np.concatenate([start, [t.start_t for t in copies]])
        end = np.concatenate([end, [t.end_t for t in copies]])
    if not len(start):
        return {"mean_queue_depth": 0.0, "max_queue_depth": 0, "device_idle_us": 0.0, "host_wait_us": 0.0}
    by_start = np.argsort(start, kind="stable")
    s, e = start[by_start], end[by_start]
    lo, hi = float(s[0]), float(e.max())
    if hi <= lo:
        return {"mean_queue_depth": 0.0, "max_queue_depth": 0, "device_idle_us": 0.0, "host_wait_us": 0.0}
    times, levels = _depth(done)
    area, peak = _area_peak(times, levels, lo, hi)
    reach = np.maximum.accumulate(e)   # the busy span so far ends here
    gap = s[1:] > reach[:-1]
    a, b = reach[:-1][gap], s[1:][gap]
    series = list(zip(times.tolist(), levels.tolist())) if len(a) else []
    return {"mean_queue_depth": area / (hi - lo), "max_queue_depth": int(peak),
            "device_idle_us": sum((b - a).tolist()),
            "host_wait_us": sum(_empty_time(series, x, y) for x, y in zip(a.tolist(), b.tolist()))}


def _depth(done: list[Any]) -> tuple[np.ndarray, np.ndarray]:
    """``counters.total_depth``: +1 at each enqueue, -1 at each end, per distinct time."""
    times = np.array([t.enqueue_t for t in done] + [t.end_t for t in done], dtype=np.float64)
    steps = np.concatenate([np.ones(len(done)), -np.ones(len(done))])
    distinct, at = np.unique(times, return_inverse=True)
    return distinct, np.cumsum(np.bincount(at, weights=steps, minlength=len(distinct)))


def _area_peak(times: np.ndarray, levels: np.ndarray, lo: float, hi: float) -> tuple[float, float]:
    """``counters._area_peak`` on the series (``times``, ``levels``)."""
    i, j = int(np.searchsorted(times, lo, "right")), int(np.searchsorted(times, hi, "left"))
    v0 = float(levels[i - 1]) if i else 0.0
    ts, vs = times[i:j], levels[i:j]
    if not len(ts):
        return 0.0 + v0 * (hi - lo), v0
    t_before = np.concatenate([[lo], ts[:-1]])
    v_before = np.concatenate([[v0], vs[:-1]])
    area = _fold(v_before * (ts - t_before))
    return area + float(vs[-1]) * (hi - float(ts[-1])), max(v0, float(vs.max()))


def _peak(first: list[Any], last: list[Any], size: list[int]) -> int:
    """``metrics._peak`` of the slots' spans (None: a slot no kernel wrote)."""
    return peak_of([(f, 1, size[j]) for j, f in enumerate(first) if f is not None]
                   + [(f, 0, -size[j]) for j, f in enumerate(last) if f is not None])


def _queue(start: list[float], end: list[float], lo: float, hi: float, net: dict[float, float]) -> RunMetrics:
    """``counters.run_metrics`` of a run whose device work is the kernels of ``start``/``end``
    (``lo``/``hi`` their window), ``net`` the queue-depth change at each time
    (``counters.total_depth``'s, made in the same order)."""
    if hi <= lo:
        return dict(_NO_QUEUE)   # type: ignore[return-value]
    times = sorted(net)
    series = list(zip(times, accumulate(map(net.__getitem__, times))))
    area, peak = _series_area_peak(series, lo, hi)
    order = iter(sorted(range(len(start)), key=start.__getitem__))   # ``counters._gaps``: holes in the busy spans
    gaps = []
    reach = end[next(order)]
    for k in order:
        s, e = start[k], end[k]
        if s > reach:
            gaps.append((reach, s))
            reach = e
        elif e > reach:
            reach = e
    return {"mean_queue_depth": area / (hi - lo), "max_queue_depth": int(peak),
            "device_idle_us": sum(b - a for a, b in gaps),
            "host_wait_us": sum(_empty_time(series, a, b) for a, b in gaps)}
