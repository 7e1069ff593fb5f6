"""Timing-only runs of a schedule: the simulator without numerics, for choosing schedules."""

from __future__ import annotations

from typing import Any

from graphexec.passes.events import Schedule
from graphexec.passes.tasks import TaskKind
from graphexec.runtime.device import Device
from graphexec.runtime.sim import DeviceTask


def simulate_makespan(schedule: Schedule, profile: Any, graph_mode: bool = True) -> float:
    """Simulated device time of ``schedule`` on ``profile`` (no kernel is computed)."""
    return simulate_times(schedule, profile, graph_mode)[0]


def simulate_times(schedule: Schedule, profile: Any,
                   graph_mode: bool = True) -> tuple[float, dict[int, tuple[float, float]]]:
    """Makespan and each kernel task's (start, end) in a timing-only run."""
    dev = Device(profile, graph_mode=graph_mode)
    streams = {0: dev.default_stream}
    for i in range(1, len(schedule.streams)):
        streams[i] = dev.create_stream()
    events = {i: dev.create_event() for i in range(schedule.num_event_ids)}
    launched = []
    for t in schedule.order:
        s = streams[t.stream]
        if t.kind is TaskKind.EVENT_RECORD:
            dev.record_event(events[t.event], s)
        elif t.kind is TaskKind.EVENT_WAIT:
            dev.stream_wait_event(s, events[t.event])
        else:
            launched.append((t.id, dev.launch(DeviceTask("kernel", s, t.name, unit=t.unit, block_dim=t.block_dim,
                                                         flops=t.flops, bytes=t.bytes, dtype=t.dtype))))
    dev.synchronize_device()
    if not launched:
        return 0.0, {}
    times = {i: (d.start_t, d.end_t) for i, d in launched}
    return max(e for _, e in times.values()) - min(s for s, _ in times.values()), times
