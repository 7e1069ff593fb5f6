"""The emulated device: memory, streams, events and the host thread's clock.

Calls mirror the ACL runtime (aclrtCreateStream, aclrtLaunchKernel, aclrtRecordEvent,
aclrtStreamWaitEvent, aclrtSynchronizeStream, ...). Launches are asynchronous: the
host pays the profile's launch cost and pushes the task into the stream's command
queue, blocking only when that queue is full or when it synchronizes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from graphexec.errors import AclError
from graphexec.runtime.memory import DeviceMemory, invalid_value
from graphexec.runtime.profiles import DeviceProfile, load_profile
from graphexec.runtime.sim import DeviceTask, Simulator
from graphexec.runtime.stream import Event, Stream

DEFAULT_PRIORITY = 4


@dataclass(frozen=True, slots=True)
class HostLaunch:
    """One host-side API call that enqueued a task, for the host track of the trace."""

    task: DeviceTask
    start: float
    end: float


class Device:
    """One emulated NPU with its own simulated clock."""

    def __init__(self, profile: DeviceProfile | str = "ascend910", device_id: int = 0) -> None:
        self.profile = load_profile(profile)
        self.id = device_id
        self.memory = DeviceMemory(self.profile.hbm_capacity_bytes)
        self.sim = Simulator(self.profile)
        self.host_t = 0.0
        self.launches: list[HostLaunch] = []
        self._stream_ids = 0
        self._event_ids = 0
        self.events: list[Event] = []
        self.default_stream = self.create_stream()

    def reset_run(self) -> None:
        """Start a fresh simulated clock (memory stays): each run is timed from zero."""
        self.sim = Simulator(self.profile)
        self.host_t = 0.0
        self.launches = []
        self.events = []
        self._stream_ids = self._event_ids = 0
        self.default_stream = self.create_stream()

    # ---- streams and events --------------------------------------------------------
    def create_stream(self, priority: int = DEFAULT_PRIORITY) -> Stream:
        live = [s for s in self.sim.streams if not s.destroyed]
        if len(live) >= self.profile.max_streams:
            raise AclError(207008, "ACL_ERROR_RT_NO_STREAM_RESOURCE",
                           f"device {self.id} allows {self.profile.max_streams} streams")
        s = Stream(self._stream_ids, min(7, max(0, int(priority))))
        self._stream_ids += 1
        self.sim.streams.append(s)
        return s

    def create_event(self) -> Event:
        if sum(not e.destroyed for e in self.events) >= self.profile.max_events:
            raise AclError(207007, "ACL_ERROR_RT_NO_EVENT_RESOURCE",
                           f"device {self.id} allows {self.profile.max_events} events")
        ev = Event(self._event_ids)
        self._event_ids += 1
        self.events.append(ev)
        return ev

    # ---- launching ---------------------------------------------------------------
    def launch(self, task: DeviceTask) -> DeviceTask:
        """Enqueue ``task`` on its stream, as the host thread would."""
        s = task.stream
        if s.destroyed:
            raise AclError(107017, "ACL_ERROR_RT_INVALID_HANDLE", f"stream {s.id} was destroyed")
        start = self.host_t
        depth = self.profile.queue_depth
        if len(s.queue) + (s.active is not None) >= depth:
            self.sim.run_until(lambda: len(s.queue) + (s.active is not None) < depth)
            start = self.host_t = max(self.host_t, self.sim.now)
        self.host_t += self.profile.launch_cost_us
        self.sim.submit(task, self.host_t)
        s.submitted.append(task)
        self.launches.append(HostLaunch(task, start, self.host_t))
        return task

    def launch_kernel(self, stream: Stream, name: str, fn: Callable[[], Any] | None,
                      write: Callable[[Any], None] | None = None, **cost: Any) -> DeviceTask:
        """Enqueue a kernel: ``fn`` computes at start, ``write`` stores at end."""
        return self.launch(DeviceTask("kernel", stream, name, start_fn=fn, end_fn=write, **cost))

    def record_event(self, event: Event, stream: Stream) -> DeviceTask:
        task = DeviceTask("record", stream, f"record e{event.id}", unit="", event=event)
        event.record_task = task
        event.complete_t = None
        return self.launch(task)

    def stream_wait_event(self, stream: Stream, event: Event) -> DeviceTask:
        if event.record_task is None:
            raise invalid_value(f"stream {stream.id} waits on event {event.id}, which was never recorded")
        task = DeviceTask("wait", stream, f"wait e{event.id}", unit="", event=_Snapshot(event.record_task))
        return self.launch(task)

    def memcpy_async(self, stream: Stream, nbytes: int, kind: str, copy: Callable[[], None],
                     name: str = "memcpy") -> DeviceTask:
        return self.launch(DeviceTask("memcpy", stream, name, unit="copy", bytes=float(nbytes),
                                      copy_kind=kind, end_fn=lambda _: copy()))

    def memcpy_sync(self, nbytes: int, kind: str, copy: Callable[[], None]) -> None:
        """A blocking copy done by the host: it costs host time, not stream time."""
        copy()
        self.host_t += self.profile.task_overhead_us + nbytes / self.profile.copy_bytes_per_us(kind)

    # ---- synchronization ------------------------------------------------------------
    def synchronize_stream(self, stream: Stream) -> None:
        self.sim.run_until(lambda: not stream.queue and stream.active is None)
        self.host_t = max(self.host_t, self.sim.now)

    def synchronize_device(self) -> None:
        self.sim.run_until(self.sim.idle)
        self.host_t = max(self.host_t, self.sim.now)

    def view(self, ptr: int, dtype: np.dtype | str, shape: tuple[int, ...]) -> np.ndarray:
        return self.memory.view(ptr, dtype, shape)


@dataclass(frozen=True, slots=True)
class _Snapshot:
    """A wait binds to the record that was newest when the wait was enqueued."""

    record_task: DeviceTask

    def is_complete_at(self, now: float) -> bool:
        return self.record_task.end_t is not None and self.record_task.end_t <= now

    @property
    def id(self) -> int:
        return self.record_task.event.id
