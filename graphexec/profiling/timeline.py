"""``timeline.json``: the run's Chrome trace plus counter tracks, as msprof's timeline has.

The trace (``trace.py``) holds a track per stream, the host's launches and a flow arrow
from each launch to its task; this puts counters ("ph": "C") on the device process in
place of the trace's own: tasks queued on all streams and on each stream, busy cube and
vector cores (split by the running kernels' units on a coupled device, where the trace
counts each busy core as both), and activation-pool bytes in use.
"""

from __future__ import annotations

from typing import Any

from graphexec.profiling.counters import Series, busy_cores, live_bytes, queue_depth, steps, total_depth
from graphexec.profiling.memory_view import memory_summary
from graphexec.profiling.record import RunRecord
from graphexec.profiling.trace import DEVICE_PID, HOST_PID, unit_keys

POOL_COUNTER = "activation pool (bytes in use)"
CORES_COUNTER = "busy cores"
QUEUE_COUNTER = "queued tasks"
HBM_COUNTER = "HBM bandwidth (GB/s)"


def hbm_series(tasks: Any) -> Series:
    """GB/s the running kernels move, each spreading its bytes evenly over its duration."""
    deltas = []
    for t in tasks:
        if t.kind == "kernel" and t.start_t is not None and t.end_t > t.start_t and t.bytes:
            rate = t.bytes / (t.end_t - t.start_t) / 1e3    # bytes per us -> GB/s
            deltas += [(t.start_t, rate), (t.end_t, -rate)]
    return [(ts, max(0.0, v)) for ts, v in steps(deltas)]


def _counter(name: str, pid: int, points: list[tuple[float, dict[str, float]]]) -> list[dict[str, Any]]:
    return [{"ph": "C", "cat": "counter", "name": name, "ts": t, "pid": pid, "tid": 0, "args": args}
            for t, args in points]


def counter_events(record: RunRecord, pid: int = DEVICE_PID) -> list[dict[str, Any]]:
    """Every counter track of the run, each a list of steps, on the device process ``pid``."""
    def series_of(name: str, key: str, series: Series) -> list[dict[str, Any]]:
        return _counter(name, pid, [(t, {key: v}) for t, v in series])

    events = series_of(QUEUE_COUNTER, "tasks", total_depth(record.tasks))
    for stream, series in queue_depth(record.tasks).items():
        events += series_of(f"queue depth (stream {stream})", "tasks", series)
    cores = busy_cores(record.tasks, record.samples, record.profile)
    matrix, vector = unit_keys(record.profile)
    events += _counter(CORES_COUNTER, pid, [(t, {matrix: c, vector: v}) for t, c, v in cores])
    events += series_of(HBM_COUNTER, "GB/s", hbm_series(record.tasks))
    return events + pool_counter(record, pid)


def pool_counter(record: RunRecord | Any, pid: int) -> list[dict[str, Any]]:
    """The activation pool's bytes in use over time (a plan's; ACL and eager runs have none)."""
    plan = getattr(record, "plan", None)
    if plan is None:
        return []
    series = live_bytes(record.tasks, record.activation_sizes(), plan.tasks.root)
    return _counter(POOL_COUNTER, pid, [(t, {"bytes": v}) for t, v in series])


def device_pid(trace: dict[str, Any], device_id: int) -> int:
    """The trace's process of device ``device_id``: a server trace names each card's
    ("device 1 (...)", pid = device id); a one-device trace has DEVICE_PID."""
    for e in trace["traceEvents"]:
        if e.get("ph") == "M" and e.get("name") == "process_name" \
                and str(e["args"].get("name", "")).startswith(f"device {device_id} ("):
            return int(e["pid"])
    return DEVICE_PID


def _sort_indices(trace: dict[str, Any]) -> list[dict[str, Any]]:
    """Host above device, streams in id order, in viewers that honour sort indices."""
    out = [{"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": pid}}
           for pid in (HOST_PID, DEVICE_PID)]
    for e in trace["traceEvents"]:
        if e.get("ph") == "M" and e.get("name") == "thread_name" and e["pid"] == DEVICE_PID:
            out.append({"ph": "M", "name": "thread_sort_index", "pid": DEVICE_PID, "tid": e["tid"],
                        "args": {"sort_index": e["tid"]}})
    return out


def timeline(record: RunRecord | Any, trace: dict[str, Any], extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """``trace`` (the result's Chrome trace) with sort indices and these counter tracks;
    ``otherData`` names the device and carries ``extra`` (stats, diagnosis) for ``graphexec view``."""
    pid = device_pid(trace, record.device_id)
    kept = [e for e in trace["traceEvents"] if e.get("ph") != "C" or e.get("pid") != pid]
    events = kept + _sort_indices(trace) + counter_events(record, pid)
    prof = record.profile
    other = {"source": "graphexec", "device": prof.name, "model": record.name, "device_pid": pid,
             "peak": {"ai_cores": prof.ai_cores, "vector_cores": prof.vector_cores, "coupled": prof.coupled,
                      "units": {r: {"name": u["name"], "label": u["label"]} for r, u in
                                ((u["role"], u) for u in prof.describe_units())},
                      "hbm_bandwidth_gbps": prof.hbm_bandwidth_gbps, "queue_depth": prof.queue_depth}}
    memory = memory_summary(record)
    if memory is not None:   # the report's memory section (a run with a memory plan)
        other["memory"] = memory
    return {**trace, "traceEvents": events, "otherData": {**other, **(extra or {})}}
