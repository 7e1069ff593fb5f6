"""Causes of a run with no compiled plan (eager mode, ACL calls), measured by replaying it.

A plan's causes re-simulate its schedule (``causes.py``); an eager run has no schedule,
only the tasks the device ran. Those are submitted again, timing only, to a fresh
simulator of a changed device: each task on a stream of the same id, at the host time it
was enqueued (so the host's launches and waits stay as they were), waits bound to the
replayed records. A wait whose record ran before the window (an event recorded before
the profiled block) has completed and is left out; collectives (driven by the fabric, not
one device) and host callbacks are left out too.

- memory, compute, dispatch: twice the HBM bandwidth, twice the peaks, no per-task
  overhead (the profiles of ``causes.PROFILES``), host times kept;
- launch: every task enqueued at time 0 (no host launch cost and no host time between
  launches: what capturing the block into an ``NPUGraph`` and replaying it approaches).

Dependency (no task graph to reschedule: the streams are the program's) and host (the
replay's queues are unbounded already, inside launch) are not measured for such a run.
"""

from __future__ import annotations

from typing import Any

from graphexec.profiling import causes as cf
from graphexec.profiling.counters import window, work
from graphexec.runtime.profiles import DeviceProfile
from graphexec.runtime.sim import DeviceTask, Simulator
from graphexec.runtime.stream import Event, EventSnapshot, Stream

KINDS = ("kernel", "memcpy", "record", "wait")
REASONS = ("launch", "dispatch", "memory", "compute")


def _copy(t: Any, stream: Stream, event: Any) -> DeviceTask:
    return DeviceTask(t.kind, stream, t.name, t.unit, t.block_dim, t.flops, t.bytes, t.dtype, t.copy_kind, event,
                      meta=t.meta)


def replay_makespan(tasks: list[Any], profile: DeviceProfile, at_zero: bool = False) -> float:
    """The makespan of ``tasks`` (a run's finished tasks) submitted again on ``profile``."""
    sim = Simulator(profile)
    streams: dict[int, Stream] = {}
    events: dict[int, Event] = {}
    copies: dict[int, DeviceTask] = {}   # id of a replayed record -> its copy
    for t in sorted((t for t in tasks if t.kind in KINDS and t.end_t is not None), key=lambda t: t.seq):
        s = streams.get(t.stream.id)
        if s is None:
            s = streams[t.stream.id] = Stream(t.stream.id, t.stream.priority)
            sim.streams.append(s)
        event: Any = None
        if t.kind == "record":
            event = events.setdefault(id(t.event), Event(t.event.id))
        elif t.kind == "wait":
            record = copies.get(id(t.event.record_task))
            if record is None:   # recorded before the window: complete already
                continue
            event = EventSnapshot(record)
        copy = _copy(t, s, event)
        if t.kind == "record":
            copies[id(t)] = copy
            event.record_task = copy
        sim.submit(copy, 0.0 if at_zero else t.enqueue_t)
    sim.run_until(sim.idle)
    lo, hi = window(work(sim.finished))
    return max(0.0, hi - lo)


def experiments(tasks: list[Any], profile: DeviceProfile) -> tuple[float, dict[str, cf.Experiment]]:
    """(the run replayed as it was, each measured cause's counterfactual)."""
    base = replay_makespan(tasks, profile)
    out = {"launch": cf.Experiment("launch", replay_makespan(tasks, profile, at_zero=True))}
    for reason in ("dispatch", "memory", "compute"):
        out[reason] = cf.Experiment(reason, replay_makespan(tasks, cf.PROFILES[reason](profile)))
    return base, out
