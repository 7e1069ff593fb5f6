"""Device state over time, rebuilt from the finished tasks of one run.

Everything here is derived from each task's enqueue, start and end times (and the
simulator's core samples when it keeps them), so it works whatever the runtime's
internals look like. A series is a list of ``(time_us, level)`` steps: the level holds
from that time until the next step.
"""

from __future__ import annotations

import bisect
from itertools import accumulate
from operator import attrgetter, itemgetter
from typing import Any, Callable, Iterable, TypedDict

Series = list[tuple[float, float]]
WORK = ("kernel", "memcpy")     # tasks that occupy the device; records and waits take no time
_TIME = itemgetter(0)
_START_SEQ = attrgetter("start_t", "seq")


def steps(deltas: Iterable[tuple[float, float]]) -> Series:
    """Running sum of ``(time, change)`` pairs, one step per distinct time."""
    out: Series = []
    level = 0.0
    for t, d in sorted(deltas):
        level += d
        if out and out[-1][0] == t:
            out[-1] = (t, level)
        else:
            out.append((t, level))
    return out


def work(tasks: Iterable[Any]) -> list[Any]:
    """The kernels and copies that ran, in start order."""
    return sorted([t for t in tasks if t.kind in WORK and t.start_t is not None], key=_START_SEQ)


def window(tasks: Iterable[Any]) -> tuple[float, float]:
    """(first start, last end) of the device work: the span the makespan measures."""
    return _window(work(tasks))


def _window(done: list[Any]) -> tuple[float, float]:
    if not done:
        return 0.0, 0.0
    return done[0].start_t, max(t.end_t for t in done)


def queue_depth(tasks: Iterable[Any]) -> dict[int, Series]:
    """Tasks in each stream's command queue (enqueued, not finished), as the runtime
    counts them against the queue's capacity."""
    deltas: dict[int, list[tuple[float, float]]] = {}
    for t in tasks:
        if t.end_t is None:
            continue
        d = deltas.setdefault(t.stream.id, [])
        d += [(t.enqueue_t, 1.0), (t.end_t, -1.0)]
    return {s: steps(d) for s, d in sorted(deltas.items())}


def total_depth(tasks: Iterable[Any]) -> Series:
    """Tasks in all command queues together: ``steps`` of +1 at each enqueue and -1 at
    each end, summed per distinct time first (the changes are whole numbers, so the sum
    is exact in any order and the levels are the running sum's)."""
    net: dict[float, float] = {}
    get = net.get
    for t in tasks:
        end = t.end_t
        if end is None:
            continue
        enq = t.enqueue_t
        net[enq] = get(enq, 0.0) + 1.0
        net[end] = get(end, 0.0) - 1.0
    times = sorted(net)
    return list(zip(times, accumulate(map(net.__getitem__, times))))


def level_at(series: Series, t: float) -> float:
    """The level of ``series`` at time ``t`` (0 before its first step)."""
    k = bisect.bisect_right(series, t, key=_TIME)
    return series[k - 1][1] if k else 0.0


def measure(series: Series, lo: float, hi: float,
            keep: Callable[[float], bool] = lambda v: True) -> tuple[float, float]:
    """(time, integral of the level) over [lo, hi] where ``keep(level)`` holds (the steps
    inside found by bisection: a run measures each idle gap of a long series)."""
    time = area = 0.0
    inner = series[bisect.bisect_right(series, lo, key=_TIME):bisect.bisect_left(series, hi, key=_TIME)]
    points = [(lo, level_at(series, lo))] + inner + [(hi, 0.0)]
    for (t0, v), (t1, _) in zip(points, points[1:]):
        if keep(v):
            time += t1 - t0
            area += v * (t1 - t0)
    return time, area


def busy_intervals(tasks: Iterable[Any]) -> list[tuple[float, float]]:
    """The union of the intervals in which some kernel or copy runs, merged."""
    return _merged(work(tasks))


def _merged(done: list[Any]) -> list[tuple[float, float]]:
    merged: list[list[float]] = []
    for t in done:
        if merged and t.start_t <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], t.end_t)
        else:
            merged.append([t.start_t, t.end_t])
    return [(a, b) for a, b in merged]


def gaps(tasks: Iterable[Any]) -> list[tuple[float, float]]:
    """The intervals inside the window in which the device runs nothing."""
    return _gaps(work(tasks))


def _gaps(done: list[Any]) -> list[tuple[float, float]]:
    busy = _merged(done)
    return [(a[1], b[0]) for a, b in zip(busy, busy[1:]) if b[0] > a[1]]


class RunMetrics(TypedDict):
    """What :func:`run_metrics` returns (Stats fields of the same names)."""

    mean_queue_depth: float
    max_queue_depth: int
    device_idle_us: float
    host_wait_us: float


def run_metrics(tasks: list[Any]) -> RunMetrics:
    """Queue depth (time-weighted mean and max over the window), device idle time, and
    the part of it in which every queue was empty: the device waited on the host."""
    done = work(tasks)   # sorted once for the window and the gaps
    lo, hi = _window(done)
    if hi <= lo:
        return {"mean_queue_depth": 0.0, "max_queue_depth": 0, "device_idle_us": 0.0, "host_wait_us": 0.0}
    depth = total_depth(tasks)
    area, peak = _area_peak(depth, lo, hi)
    idle = _gaps(done)
    host_wait = sum(_empty_time(depth, a, b) for a, b in idle)
    return {"mean_queue_depth": area / (hi - lo), "max_queue_depth": int(peak),
            "device_idle_us": sum(b - a for a, b in idle), "host_wait_us": host_wait}


def _area_peak(series: Series, lo: float, hi: float) -> tuple[float, float]:
    """``measure(series, lo, hi)[1]`` and the highest level in [lo, hi), in one walk (the
    same additions in the same order; no ``keep`` call per step)."""
    i, j = bisect.bisect_right(series, lo, key=_TIME), bisect.bisect_left(series, hi, key=_TIME)
    t0, v = lo, series[i - 1][1] if i else 0.0
    area, peak = 0.0, v
    for t1, level in series[i:j]:
        area += v * (t1 - t0)
        t0, v = t1, level
        if level > peak:
            peak = level
    return area + v * (hi - t0), peak


def _empty_time(series: Series, lo: float, hi: float) -> float:
    """``measure(series, lo, hi, lambda v: v <= 0)[0]``: the time in [lo, hi] at level 0."""
    i, j = bisect.bisect_right(series, lo, key=_TIME), bisect.bisect_left(series, hi, key=_TIME)
    t0, v = lo, series[i - 1][1] if i else 0.0
    time = 0.0
    for t1, level in series[i:j]:
        if v <= 0:
            time += t1 - t0
        t0, v = t1, level
    return time + (hi - t0) if v <= 0 else time


def busy_cores(tasks: list[Any], samples: list[Any], profile: Any) -> list[tuple[float, int, int]]:
    """(time, busy cube cores, busy vector cores) steps.

    The simulator's samples count busy cores exactly; on a coupled device (one core does
    both) they are split by the units of the kernels running then. Without samples the
    cores each kernel held at most are used, capped at the pool sizes.
    """
    kernels = sorted((t for t in tasks if t.kind == "kernel" and t.start_t is not None), key=lambda t: t.start_t)
    if samples and hasattr(samples[0], "cube"):
        return _from_samples(samples, kernels, profile)
    cap_c = profile.ai_cores
    cap_v = profile.ai_cores if profile.coupled else profile.vector_cores
    deltas = sorted((t, k.max_cores * sign * (k.unit == "cube"), k.max_cores * sign * (k.unit == "vector"))
                    for k in kernels for t, sign in ((k.start_t, 1), (k.end_t, -1)))
    out: list[tuple[float, int, int]] = []
    cube = vec = 0
    for t, dc, dv in deltas:
        cube, vec = cube + dc, vec + dv
        point = (t, min(cap_c, cube), min(cap_v, vec))
        out[-1:] = [point] if out and out[-1][0] == t else [*out[-1:], point]
    return out


def _from_samples(samples: list[Any], kernels: list[Any], profile: Any) -> list[tuple[float, int, int]]:
    if not profile.coupled:
        return [(s.t, int(s.cube), int(s.vector)) for s in samples]
    out, running, i = [], [], 0
    for s in samples:   # both in time order: a sweep keeps the running kernels
        while i < len(kernels) and kernels[i].start_t <= s.t:
            running.append(kernels[i])
            i += 1
        running = [k for k in running if k.end_t > s.t]
        cube = sum(k.max_cores for k in running if k.unit == "cube")
        total = cube + sum(k.max_cores for k in running if k.unit == "vector")
        busy = int(s.cube)
        share = round(busy * cube / total) if total else 0
        out.append((s.t, share, busy - share))
    return out


def live_spans(tasks: Iterable[Any], sizes: dict[str, int],
               root: Callable[[str], str]) -> dict[tuple[str, int], list[Any]]:
    """(activation tensor, run) -> [first write's start, last read's end, the task that first
    wrote it]. A plan run several times on one record (a pipeline card's micro-batches) has
    each tensor once per run: a task's k-th time in the record is run k, and a read of run k
    holds run k's tensor, or the newest one written before it (a loop body's read of a value
    from outside the body or from the iteration before)."""
    span: dict[tuple[str, int], list[Any]] = {}
    seen: dict[int, int] = {}
    newest: dict[str, int] = {}
    for t in tasks:
        task = t.meta.get("task")
        if task is None or t.kind != "kernel" or t.start_t is None:
            continue
        k = seen.get(id(task), 0)
        seen[id(task)] = k + 1
        for name in map(root, task.writes):
            if name in sizes:
                s = span.setdefault((name, k), [t.start_t, t.end_t, t])
                newest[name] = k
                if t.start_t < s[0]:
                    s[0], s[2] = t.start_t, t
                s[1] = max(s[1], t.end_t)
        for name in map(root, task.reads):
            key = (name, k) if (name, k) in span else (name, newest.get(name, -1))
            if key in span:
                span[key][1] = max(span[key][1], t.end_t)
    return span


def live_bytes(tasks: Iterable[Any], sizes: dict[str, int], root: Callable[[str], str]) -> Series:
    """Activation-pool bytes in use: a tensor holds its bytes from the start of its
    writer to the end of its last reader (the rule of the executed live peak)."""
    span = live_spans(tasks, sizes, root)
    return steps([(s[0], sizes[n]) for (n, _), s in span.items()] + [(s[1], -sizes[n]) for (n, _), s in span.items()])
