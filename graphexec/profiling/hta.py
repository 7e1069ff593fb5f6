"""The analyses Holistic Trace Analysis (HTA) runs, on one run's finished device tasks.

- idle time per stream, split as HTA splits it: host wait (the next task was not yet
  launched), kernel wait (back-to-back gaps under 30 ns) and other (waiting on another
  stream's event, or on free cores);
- the critical path from the last task back through kernels, launches and sync edges;
- short-kernel launch statistics (kernels shorter than their host launch, launch delay);
- queue length per stream and the time the host spent blocked on a full queue.
"""

from __future__ import annotations

import statistics
from typing import Any

from graphexec.profiling.counters import measure, queue_depth, window, work

KERNEL_WAIT_US = 0.03        # HTA: consecutive kernels less than 30 ns apart
LAUNCH_DELAY_CUTOFFS = (50.0, 100.0)   # HTA's launch-delay outlier cut-offs (us)
EPS = 1e-6


def idle_breakdown(tasks: list[Any]) -> dict[int, dict[str, float]]:
    """Per stream: ``idle_us`` inside the run's window and its ``host_wait_us``,
    ``kernel_wait_us`` and ``other_us`` parts."""
    lo, hi = window(tasks)
    out: dict[int, dict[str, float]] = {}
    by_stream: dict[int, list[Any]] = {}
    for t in work(tasks):
        by_stream.setdefault(t.stream.id, []).append(t)
    for sid, ts in sorted(by_stream.items()):
        host = kern = other = 0.0
        prev_end = lo
        for t in ts:
            gap = t.start_t - prev_end
            if gap > EPS:
                if gap < KERNEL_WAIT_US:
                    kern += gap
                else:
                    h = min(gap, max(0.0, t.enqueue_t - prev_end))
                    host += h
                    other += gap - h
            prev_end = max(prev_end, t.end_t)
        other += max(0.0, hi - prev_end)
        out[sid] = {"idle_us": host + kern + other, "host_wait_us": host, "kernel_wait_us": kern, "other_us": other}
    return out


def _why_started(t: Any, prev: dict[int, Any], launches: dict[int, Any]) -> tuple[str, Any]:
    """The edge that released ``t``: the stream's previous task, its launch, or an event."""
    start = t.start_t
    if t.kind == "wait" and t.event.record_task.end_t is not None and t.event.record_task.end_t >= start - EPS:
        return "sync", t.event.record_task
    p = prev.get(id(t))
    if p is not None and p.end_t >= start - EPS:
        return "stream", p
    launch = launches.get(id(t))
    if launch is not None and launch.end >= start - EPS:
        return "launch", launch
    if p is not None:
        return "stream", p
    return "start", None


def _host_back(lc: Any, launches: list[Any], index: dict[int, int],
               ends: dict[tuple[int, float], Any]) -> tuple[float, int, Any]:
    """Walk back along the host from launch ``lc``: launches run one after another until
    one waited for room in a full queue (a device task's end released it). Returns (host
    launch time on the path, queue blocks (0 or 1), the device task that released it or None)."""
    host = 0.0
    while True:
        host += lc.end - lc.start
        i = index[id(lc)]
        before = launches[i - 1] if i > 0 else None
        if before is not None and before.end >= lc.start - EPS:
            lc = before
            continue
        freed = ends.get((lc.task.stream.id, round(lc.start, 6)))
        return host, int(freed is not None), freed


def critical_path(tasks: list[Any], launches: list[Any]) -> dict[str, Any]:
    """The chain of tasks and edges that set the makespan, walked back from the last end.

    Edge types follow HTA's: kernel time on the path, launch (the task waited for the host
    to launch it, and the host for the launches before it), queue (a launch waited for a
    full queue to drain), sync (an event record on another stream), stream order, and the
    gaps between (waiting for cores or the device's dispatch overhead)."""
    done = [t for t in tasks if t.start_t is not None and t.end_t is not None]
    out: dict[str, Any] = {"tasks": [], "kernel_us": 0.0, "launch_us": 0.0, "queue_blocks": 0, "sync_edges": 0,
                           "gap_us": 0.0}
    if not done:
        return out
    prev: dict[int, Any] = {}
    last: dict[int, Any] = {}
    for d in sorted(done, key=lambda d: (d.start_t, d.seq)):
        if d.stream.id in last:
            prev[id(d)] = last[d.stream.id]
        last[d.stream.id] = d
    by_task = {id(lc.task): lc for lc in launches}
    index = {id(lc): i for i, lc in enumerate(launches)}
    ends = {(d.stream.id, round(d.end_t, 6)): d for d in sorted(done, key=lambda d: -d.seq)}   # first task wins
    t: Any = max(work(done) or done, key=lambda d: (d.end_t, d.seq))
    for _ in range(2 * len(done) + 1):   # every step goes to an earlier task: this bounds the walk
        if t is None:
            break
        out["tasks"].append(t.name)
        out["kernel_us"] += (t.end_t - t.start_t) if t.kind in ("kernel", "memcpy") else 0.0
        edge, src = _why_started(t, prev, by_task)
        if edge == "start":
            break
        if edge == "launch":
            out["gap_us"] += max(0.0, t.start_t - src.end)
            host, blocked, t = _host_back(src, launches, index, ends)
            out["launch_us"] += host
            out["queue_blocks"] += blocked
            continue
        out["sync_edges"] += edge == "sync"
        out["gap_us"] += max(0.0, t.start_t - src.end_t)
        t = src
    out["tasks"].reverse()
    return out


def launch_stats(tasks: list[Any], launches: list[Any], graph_mode: bool) -> dict[str, float]:
    """Kernels shorter than their host launch, and launch delay (launch end to start)."""
    by_task = {id(lc.task): lc for lc in launches}
    kernels = [t for t in work(tasks) if t.kind == "kernel"]
    pairs = [(t, by_task[id(t)]) for t in kernels if id(t) in by_task]
    short = [t for t, lc in pairs if (t.end_t - t.start_t) < (lc.end - lc.start)]
    delays = [t.start_t - lc.end for t, lc in pairs]
    durs = [t.end_t - t.start_t for t in kernels]
    out = {"kernels": float(len(kernels)), "short_kernels": float(len(short)),
           "short_kernel_us": sum(t.end_t - t.start_t for t in short),
           "median_kernel_us": statistics.median(durs) if durs else 0.0,
           "mean_launch_us": statistics.fmean([lc.end - lc.start for _, lc in pairs]) if pairs and not graph_mode
           else 0.0,
           "mean_launch_delay_us": statistics.fmean(delays) if delays else 0.0,
           "max_launch_delay_us": max(delays, default=0.0)}
    for cut in LAUNCH_DELAY_CUTOFFS:
        out[f"launch_delay_over_{cut:g}us"] = float(sum(d > cut for d in delays))
    return out


def queue_summary(tasks: list[Any], launches: list[Any], capacity: int) -> dict[int, dict[str, float]]:
    """Per stream: mean and max queue length over the window, and the host's time blocked
    on that stream's full queue (a launch that started after the previous one ended)."""
    lo, hi = window(tasks)
    span = max(hi - lo, EPS)
    out: dict[int, dict[str, float]] = {}
    for sid, series in queue_depth(tasks).items():
        _, area = measure(series, lo, hi)
        out[sid] = {"mean": area / span, "max": max((v for _, v in series), default=0.0), "blocked_us": 0.0}
    prev_end = None
    for lc in launches:
        if prev_end is not None and lc.start > prev_end + EPS and lc.task.stream.id in out:
            out[lc.task.stream.id]["blocked_us"] += lc.start - prev_end
        prev_end = lc.end
    for q in out.values():
        q["full"] = float(q["max"] >= capacity)
    return out


def analyses(record: Any) -> dict[str, Any]:
    """Every analysis above for one RunRecord, JSON-ready."""
    capacity = min(record.profile.queue_depth, record.profile.max_tasks_per_stream)
    graph_mode = record.graph_mode
    return {"idle": {str(k): v for k, v in idle_breakdown(record.tasks).items()},
            "critical_path": critical_path(record.tasks, record.launches),
            "launch": launch_stats(record.tasks, record.launches, graph_mode),
            "queues": {str(k): v for k, v in queue_summary(record.tasks, record.launches, capacity).items()}}
