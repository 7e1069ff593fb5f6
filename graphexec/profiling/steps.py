"""Several runs on one timeline: each run is a step (msprof's step trace, torch_npu's
``ProfilerStep#N``), and the steps follow one another on one clock.

A run's own times count from its start; a device's clock keeps running from run to run
(``Device.clock_us``), and each run's record says where on it the run started
(``RunRecord.clock``). Step ``s`` starts as far after step ``s - 1`` as its run started
after the previous one on their device's clock, so the host's time between them (copies
out, synchronize, the next run's feeds and launches) shows as the device's idle time. A
step whose run is on another clock (another session's device, a card of a multi-card
run) starts where step ``s - 1`` ended (the latest end of any of its events, host
launches included). The runs of one result (the cards of one multi-card run) are one
step and start together. Every device keeps one host and one
device process across the steps (pids ``2 d`` and ``2 d + 1``), each slice carries its
``args.step``, and a ``steps`` track on each host process marks the steps themselves.
"""

from __future__ import annotations

from typing import Any, Sequence

STEP_TID = 1 << 20   # the host process's track of step slices, below every stream and thread


def step_ids(extras: Sequence[dict[str, Any]]) -> list[int]:
    """Run k -> its step (from 1): a new step per result; a result's other cards share it;
    a run whose extra names its ``step`` (the torch-style profiler's ``prof.step()``) that one."""
    ids: list[int] = []
    for k, extra in enumerate(extras):
        group = extra.get("group", k)
        if "step" in extra:
            ids.append(int(extra["step"]))
        else:
            ids.append(ids[group] if group != k and group < len(ids) else (max(ids, default=0) + 1))
    return ids


def window_step_events(device_ids: Sequence[int], steps: Sequence[int],
                       windows: Sequence[tuple[float, float]]) -> list[dict[str, Any]]:
    """``ProfilerStep#s`` slices of runs laid on their device's own clock (eager steps: each
    run's ``window`` is the host's (start, end) of its step, events keep their times)."""
    out: list[dict[str, Any]] = []
    named: set[int] = set()
    for d, s, (lo, hi) in sorted(set(zip(device_ids, steps, (tuple(w) for w in windows)))):
        if d not in named:
            named.add(d)
            out.append({"ph": "M", "name": "thread_name", "pid": 2 * d, "tid": STEP_TID, "args": {"name": "steps"}})
        out.append({"ph": "X", "cat": "step", "name": f"ProfilerStep#{s}", "ts": lo, "dur": max(0.0, hi - lo),
                    "pid": 2 * d, "tid": STEP_TID, "args": {"step": s}})
    return out


def span_us(events: Sequence[dict[str, Any]]) -> float:
    """The latest end of any timed event of a run's trace (microseconds from its start)."""
    return max((float(e["ts"]) + float(e.get("dur", 0.0)) for e in events if "ts" in e), default=0.0)


Clock = tuple[int, float, float] | None   # (clock id, start on it, host time): ``RunRecord.clock``


def lengths(spans: Sequence[float], steps: Sequence[int], clocks: Sequence[Clock]) -> dict[int, float]:
    """Step -> how long it lasts: its runs' latest event end, or host time where longer."""
    out: dict[int, float] = {}
    for span, s, clock in zip(spans, steps, clocks):
        out[s] = max(out.get(s, 0.0), span, clock[2] if clock is not None else 0.0)
    return out


def starts(spans: Sequence[float], steps: Sequence[int], clocks: Sequence[Clock] | None = None) -> list[float]:
    """Run k -> where its step starts on the one timeline."""
    clocks = clocks if clocks is not None else [None] * len(steps)
    length = lengths(spans, steps, clocks)
    first: dict[int, Clock] = {}   # step -> the clock of its first run
    for s, clock in zip(steps, clocks):
        first.setdefault(s, clock)
    at: dict[int, float] = {}
    prev: int | None = None
    for s in sorted(length):
        if prev is None:
            at[s] = 0.0
        else:
            at[s] = at[prev] + length[prev]
            here, there = first[s], first[prev]
            if here is not None and there is not None and here[0] == there[0]:
                idle = here[1] - there[1] - length[prev]   # the clock ran on: runs not in this profile
                at[s] += idle if idle > 1e-6 else 0.0      # (else 0, or the rounding of the clock's sums)
        prev = s
    return [at[s] for s in steps]


def place(events: Sequence[dict[str, Any]], k: int, device_id: int, step: int, start: float,
          named: set[tuple[Any, ...]]) -> list[dict[str, Any]]:
    """Run ``k``'s events on the one timeline: its device's processes, shifted to ``start``,
    flow ids apart, each slice tagged with its step; a process or thread named once."""
    out = []
    for e in events:
        e = dict(e, pid=2 * device_id + (e["pid"] != 0))
        if "ts" in e:
            e["ts"] = float(e["ts"]) + start
        if "id" in e:
            e["id"] = (k << 44) + int(e["id"])
        if e.get("ph") == "X":
            e["args"] = {**e.get("args", {}), "step": step}
            if "correlation" in e["args"]:   # HTA's launch-to-kernel id: apart as the flow ids are
                e["args"]["correlation"] = (k << 44) + int(e["args"]["correlation"])
            if "device" in e["args"]:
                e["args"]["device"] = device_id
        elif e.get("ph") == "M":
            key = (e["pid"], e.get("tid"), e["name"])
            if key in named:
                continue
            named.add(key)
            if e["name"] == "process_name" and e["pid"] % 2 == 0 and device_id:
                e["args"] = {"name": f"{e['args']['name']} (device {device_id})"}
            elif e["name"] == "process_sort_index":
                e["args"] = {"sort_index": e["pid"]}
        out.append(e)
    return out


def step_events(device_ids: Sequence[int], steps: Sequence[int], begins: Sequence[float],
                spans: Sequence[float], clocks: Sequence[Clock] | None = None) -> list[dict[str, Any]]:
    """A ``ProfilerStep#s`` slice per step on each device's host process, as long as the
    step's host time (where known) or its events."""
    length = lengths(spans, steps, clocks if clocks is not None else [None] * len(steps))
    out: list[dict[str, Any]] = []
    seen: set[tuple[int, int]] = set()
    for d, s, begin in zip(device_ids, steps, begins):
        if (d, s) in seen:
            continue
        if not any(key[0] == d for key in seen):
            out.append({"ph": "M", "name": "thread_name", "pid": 2 * d, "tid": STEP_TID, "args": {"name": "steps"}})
        seen.add((d, s))
        dur = length[s]
        out.append({"ph": "X", "cat": "step", "name": f"ProfilerStep#{s}", "ts": begin, "dur": dur,
                    "pid": 2 * d, "tid": STEP_TID, "args": {"step": s}})
    return out
