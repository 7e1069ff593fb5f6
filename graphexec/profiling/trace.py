"""The timeline as a Chrome trace (Trace Event Format), one track per stream.

pid 0 is the host (its launch calls), pid 1 the device with one thread per stream;
flow arrows go from each launch to the task it enqueued ("flow") and from each event
record to the waits on it ("sync"). A server's trace (``server_trace``) gives each card
the pid of its device id, and the host the pid after the last one.

For Holistic Trace Analysis (HTA), which reads PyTorch profiler traces, every kernel, copy
and collective also carries ``args.stream`` (its stream id, as ``tid``), ``args.device``
(its device id) and ``args.correlation`` (the id of the launch arrow, which its host launch
carries too; a graph-mode run's one model-execute call carries none), and the trace has a
top-level ``distributedInfo`` (rank 0, backend hccl). The timeline's format, every key, is
documented in one place: ``schemas/timeline.md``.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

HOST_PID, DEVICE_PID = 0, 1
DISTRIBUTED = {"rank": 0, "backend": "hccl"}   # HTA reads a trace's rank here (one trace file is rank 0)
_CAT = {"kernel": "kernel", "memcpy": "memcpy", "record": "event", "wait": "event", "callback": "callback",
        "control": "control", "hccl": "hccl"}


@dataclass(frozen=True)
class Where:
    """The trace's processes for one device: its own pid, the host's, the host thread's
    tid, and an offset that keeps its flow ids apart from other devices'."""

    device_pid: int = DEVICE_PID
    host_pid: int = HOST_PID
    host_tid: int = 0
    flow_base: int = 0
    device_id: int = 0


HTA_KINDS = ("kernel", "memcpy", "hccl")


def _task_event(t: Any, where: Where) -> dict[str, Any]:
    ev = _task_event_plain(t, where.device_pid)
    if t.kind in HTA_KINDS:   # what HTA reads of a device kernel (see the module's docstring)
        ev["args"] = {**ev.get("args", {}), "stream": t.stream.id, "device": where.device_id,
                      "correlation": where.flow_base + t.seq}
    return ev


def _task_event_plain(t: Any, pid: int) -> dict[str, Any]:
    ev: dict[str, Any] = {"ph": "X", "cat": _CAT.get(t.kind, t.kind), "name": t.name, "ts": t.start_t,
                          "dur": t.end_t - t.start_t, "pid": pid, "tid": t.stream.id}
    task = t.meta.get("task")
    if t.kind == "kernel":
        node = getattr(task, "node", None)
        ev["args"] = {"node": t.name, "op": getattr(task, "op", t.meta.get("op", t.name)),
                      "inputs": list(node.all_inputs) if node is not None
                      else t.meta.get("inputs", [r[2] for r in t.reads]),
                      "outputs": [o for o in node.outputs if o] if node is not None
                      else t.meta.get("outputs", [w[2] for w in t.writes]),
                      "cores": t.max_cores, "block_dim": t.block_dim, "unit": t.unit}
        if task is not None and getattr(task, "dtype", None):   # the dtype the precision mode timed it in
            ev["args"]["dtype"] = task.dtype
        if node is not None and "fused" in node.meta:   # graph fusion: the nodes this one kernel runs
            ev["args"].update(fused=list(node.meta["fused"]), fusion_rules=list(node.meta["rules"]))
    elif t.kind in ("record", "wait"):
        ev["args"] = {"event": t.event.id, "kind": t.kind, "record_id": _record_id(t)}
    elif t.kind == "memcpy":
        ev["args"] = {"bytes": t.bytes, "kind": t.copy_kind}
        if "link" in t.meta:
            ev["args"].update(link=t.meta["link"], src=t.meta.get("src"), dst=t.meta.get("dst"))
    elif t.kind == "hccl":
        ev["args"] = {"bytes": t.bytes, "algorithm": t.meta.get("algorithm"), "links": t.meta.get("link")}
    return ev


def _record_id(t: Any) -> int:
    """A record's id, unique within the run (its place in the device's submission order);
    for a wait, the id of the record it waits on (the newest one when it was launched)."""
    return t.seq if t.kind == "record" else t.event.record_task.seq


def _sync_flows(finished: list[Any], where: Where) -> list[dict[str, Any]]:
    """An arrow from each record to every wait on it: the cross-stream dependency. Flow ids
    count on from the launch arrows' (task seq numbers), so no viewer can pair them up."""
    base = where.flow_base + max((t.seq for t in finished), default=-1) + 1
    pid = where.device_pid
    out: list[dict[str, Any]] = []
    for t in finished:
        if t.kind != "wait" or t.start_t is None:
            continue
        r = t.event.record_task
        out.append({"ph": "s", "cat": "sync", "name": "event", "id": base + t.seq, "ts": r.start_t,
                    "pid": pid, "tid": r.stream.id})
        out.append({"ph": "f", "bp": "e", "cat": "sync", "name": "event", "id": base + t.seq, "ts": t.start_t,
                    "pid": pid, "tid": t.stream.id})
    return out


def chrome_trace(dev: Any, name: str = "graphexec", device_id: int | None = None) -> dict[str, Any]:
    """The run that just finished on ``dev`` as ``{"traceEvents": [...]}``."""
    device_id = getattr(dev, "id", 0) if device_id is None else device_id
    device = device_events(dev, f"device ({name})", Where(device_id=device_id))
    events: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": HOST_PID, "tid": 0, "args": {"name": "host"}},
        device[0],   # the device's process_name
        {"ph": "M", "name": "thread_name", "pid": HOST_PID, "tid": 0, "args": {"name": "launch thread"}},
        *device[1:],
    ]
    return {"traceEvents": events, "displayTimeUnit": "ns", "distributedInfo": DISTRIBUTED}


def server_trace(devices: dict[int, Any], name: str = "graphexec") -> dict[str, Any]:
    """Several cards' timelines in one trace: ``pid`` is the device id, and the host (one
    process after the last device) has a launch thread per device."""
    host = max(devices, default=-1) + 1
    events: list[dict[str, Any]] = [{"ph": "M", "name": "process_name", "pid": host, "tid": 0,
                                     "args": {"name": "host"}}]
    for i in sorted(devices):
        events.append({"ph": "M", "name": "thread_name", "pid": host, "tid": i,
                       "args": {"name": f"launch thread (device {i})"}})
        events += device_events(devices[i], f"device {i} ({name})", Where(i, host, i, i << 40, i))
    return {"traceEvents": events, "displayTimeUnit": "ns", "distributedInfo": DISTRIBUTED}


def device_events(dev: Any, label: str, where: Where) -> list[dict[str, Any]]:
    """One device's process: its streams, tasks, event arrows, launches and counters."""
    pid = where.device_pid
    events: list[dict[str, Any]] = [{"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
                                     "args": {"name": label}}]
    for s in dev.sim.streams:
        events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": s.id,
                       "args": {"name": f"stream {s.id}"}})
    finished = sorted(dev.sim.finished, key=lambda t: (t.start_t, t.seq))
    events += [_task_event(t, where) for t in finished]
    events += _sync_flows(finished, where)
    events += _launch_events(dev, where)
    events += _counters(dev, pid)
    return events


def _launch_events(dev: Any, where: Where) -> list[dict[str, Any]]:
    """The host's launch calls, with an arrow from each to the task it enqueued."""
    hp, ht, base = where.host_pid, where.host_tid, where.flow_base
    events: list[dict[str, Any]] = []
    shown: set[tuple[float, float]] = set()
    for launch in dev.launches:
        t = launch.task
        if dev.graph_mode:  # one ModelExecute call started every task of the loaded graph
            if (launch.start, launch.end) not in shown:
                shown.add((launch.start, launch.end))
                events.append({"ph": "X", "cat": "launch", "name": f"model execute ({len(dev.launches)} tasks)",
                               "ts": launch.start, "dur": launch.end - launch.start, "pid": hp, "tid": ht})
        else:
            events.append({"ph": "X", "cat": "launch", "name": f"launch {t.name}", "ts": launch.start,
                           "dur": launch.end - launch.start, "pid": hp, "tid": ht,
                           "args": {"correlation": base + t.seq}})
        if t.start_t is not None and t.end_t is not None:
            # each end of the arrow sits inside its slice, not on an edge that the slice
            # before or after shares, so viewers bind it to the right launch and task
            events.append({"ph": "s", "cat": "flow", "name": "launch", "id": base + t.seq,
                           "ts": (launch.start + launch.end) / 2, "pid": hp, "tid": ht})
            events.append({"ph": "f", "bp": "e", "cat": "flow", "name": "launch", "id": base + t.seq,
                           "ts": (t.start_t + t.end_t) / 2, "pid": where.device_pid, "tid": t.stream.id})
    return events


def record_trace(record: Any) -> dict[str, Any]:
    """The trace of a finished run from its RunRecord (the device has moved on since)."""
    dev = SimpleNamespace(sim=record.sim, launches=record.launches, graph_mode=record.graph_mode)
    return chrome_trace(dev, record.name, record.device_id)


def unit_keys(profile: Any) -> tuple[str, str]:
    """The busy-cores counter's keys: the matrix and vector units' names in ``profile``."""
    if profile is None:
        return "cube", "vector"
    return profile.unit_name("cube"), profile.unit_name("vector")


def _counters(dev: Any, pid: int = DEVICE_PID) -> list[dict[str, Any]]:
    """Busy cores and command-queue depth over time, as counter tracks of the device."""
    out = []
    names = unit_keys(getattr(dev.sim, "profile", None))
    for s in getattr(dev.sim, "samples", ()):
        out.append({"ph": "C", "cat": "counter", "name": "busy cores", "ts": s[0], "pid": pid,
                    "args": {names[0]: s[1], names[1]: s[2]}})
        if len(s) > 4:
            out.append({"ph": "C", "cat": "counter", "name": "queued tasks", "ts": s[0], "pid": pid,
                        "args": {"tasks": s[4]}})
    return out
