"""The emulated device: memory, streams, events and the host thread's clock.

Calls mirror the ACL runtime (aclrtCreateStream, aclrtLaunchKernel, aclrtRecordEvent,
aclrtStreamWaitEvent, aclrtSynchronizeStream, ...). Launches are asynchronous: the
host pays the profile's launch cost and pushes the task into the stream's command
queue, blocking only when that queue is full or when it synchronizes. Eager mode
(``batch_waits``) holds the launches that find their queue full and submits them in
batches, each as it would have been at its turn (``Device._hold``): the same timeline.
``graphexec.acl`` is the ACL-style facade over this class.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any, Callable, Iterator

import numpy as np

from graphexec.runtime.caching import CachingAllocator
from graphexec.runtime.codes import (
    RT_NO_EVENT_RESOURCE,
    RT_NO_STREAM_RESOURCE,
    RT_STREAM_SYNC_TIMEOUT,
    RT_STREAM_TASK_FULL,
    acl_error,
    invalid_handle,
    invalid_value,
)
from graphexec.runtime.hazards import Hazard, HazardChecker, HostOp
from graphexec.runtime.held import Submitted
from graphexec.runtime.host import CLOCKS, GraphLaunch, HostLaunch
from graphexec.runtime.memory import DeviceMemory
from graphexec.runtime.profiles import DeviceProfile, load_profile
from graphexec.runtime.sim import HOST_COPY_BYTES_PER_US, DeviceTask, SimGroup, Simulator
from graphexec.runtime.stream import Event, EventSnapshot, Stream

DEFAULT_PRIORITY = 0     # RT_STREAM_PRIORITY_DEFAULT in CANN's rt.h
BATCH = True             # a ``batch_waits`` device holds launches onto a full queue (False: each waits at once)
BATCH_MAX = 1024         # launches held at most before they are submitted
BATCH_QUIET = 4          # held launches from which their submission runs inside ``Device.quiet``


_new_launch = tuple.__new__


class Device:
    """One emulated NPU with its own simulated clock.

    Its clock keeps running from run to run (``clock_us``: ``runtime/host.py``).

    Args:
        profile: a DeviceProfile or a built-in name / YAML path.
        device_id: the ACL device id (it also keeps pointers of devices apart).
        check_hazards: record byte ranges and report unsynchronized accesses.
    """

    sim = Submitted[Simulator]()
    host_t = Submitted[float]()
    launches = Submitted["list[HostLaunch]"]()

    def __init__(self, profile: DeviceProfile | str = "ascend910", device_id: int = 0,
                 check_hazards: bool = False, graph_mode: bool = False, group: SimGroup | None = None) -> None:
        self.profile = load_profile(profile)
        self.id = device_id
        self.group = group      # a server's devices share one simulated clock
        self.check_hazards = check_hazards
        self.graph_mode = graph_mode
        self._allocator: CachingAllocator | None = None
        self.memory = DeviceMemory(self.profile.hbm_capacity_bytes, device_id)
        self._capacity = min(self.profile.queue_depth, self.profile.max_tasks_per_stream)
        self._on_device = 0
        # eager mode's settings (see ``_hold``): launches onto a full queue are held and
        # submitted in batches, the kernels a batch runs inside ``quiet`` (numpy's warnings
        # off once: ``kernels/quiet.py``, a layer this one does not import)
        self.batch_waits = False
        self.quiet: Callable[[], AbstractContextManager[Any]] = nullcontext
        self._held: list[DeviceTask] = []
        self._bandwidths: tuple[DeviceProfile, dict[str, float]] | None = None   # ``_bandwidth``
        self._submitting = False
        self.clock_id = next(CLOCKS)
        self.clock_us = self._host_t = 0.0
        self.reset_run()

    @property
    def allocator(self) -> CachingAllocator:
        """The caching allocator for tensors sized at run time (created on first use)."""
        if self._allocator is None:
            self._allocator = CachingAllocator(self)
        return self._allocator

    def reset_run(self, spare: Simulator | None = None) -> None:
        """Start the next run (memory stays): its simulator counts from zero, at ``clock_us``.
        ``spare``: a simulator of this device that a replayed run threw away, made fresh again
        (``Simulator.renew``) instead of building a new one (7 us of a decode step's run)."""
        old = getattr(self, "_sim", None)
        if old is not None and self._held:
            self._submit_held()
        self.clock_us += self._host_t
        if self.group is not None and old is not None:
            self.group.sims.remove(old)
        if spare is None or self.group is not None or spare.profile is not self.profile or not spare.renew():
            spare = Simulator(self.profile, self.group)
        self._sim = spare
        self._host_t = 0.0
        self._execute: tuple[float, float] | None = None
        self._launches: list[HostLaunch] = []
        self.events: list[Event] = []
        self._stream_ids = self._event_ids = 0
        self._live_streams = self._live_events = 0
        self.checker = HazardChecker(self.memory) if self.check_hazards else None
        self.default_stream = self.create_stream()

    @property
    def hazards(self) -> list[Hazard]:
        """Every unsynchronized pair of accesses found so far (empty when checking is off)."""
        return [] if self.checker is None else list(self.checker.hazards)

    # ---- streams and events --------------------------------------------------------
    def create_stream(self, priority: int = DEFAULT_PRIORITY, context: Any = None) -> Stream:
        if self._live_streams >= self.profile.max_streams:
            raise acl_error(RT_NO_STREAM_RESOURCE, f"device {self.id} allows {self.profile.max_streams} streams")
        s = Stream(self._stream_ids, min(7, max(0, int(priority))), context=context)
        self._stream_ids += 1
        self._live_streams += 1
        self.sim.streams.append(s)
        return s

    def destroy_stream(self, stream: Stream) -> None:
        """Wait for the stream's tasks, then release it."""
        self.synchronize_stream(stream)
        stream.destroyed = True
        self._live_streams -= 1

    def create_event(self, context: Any = None) -> Event:
        if self._live_events >= self.profile.max_events:
            raise acl_error(RT_NO_EVENT_RESOURCE, f"device {self.id} allows {self.profile.max_events} events")
        ev = Event(self._event_ids, context=context)
        self._event_ids += 1
        self._live_events += 1
        self.events.append(ev)
        return ev

    def destroy_event(self, event: Event) -> None:
        event.destroyed = True
        self._live_events -= 1

    # ---- launching ---------------------------------------------------------------
    def launch(self, task: DeviceTask) -> DeviceTask:
        """Enqueue ``task`` on its stream, as the host thread would.

        In graph mode (``self.graph_mode``, GE's static-graph execution) the task list was
        loaded onto the device with the model, so a run pays no host launch cost per task
        and no command queue fills; only the device's own per-task overhead remains.
        """
        s = task.stream
        if s.destroyed:
            raise invalid_handle(f"stream {s.id} was destroyed")
        held = self._held
        if held:
            if len(held) < BATCH_MAX and not (self._on_device or self.graph_mode):   # ``_hold``, inline
                held.append(task)
                if self._allocator is not None and self._allocator.live:
                    self._note_use(task)
                return task
            self._submit_held()
        if self._on_device:
            return self._launch_on_device(task)
        if self.graph_mode:
            start, end = self._execute or self._model_execute()
        else:
            if s.pending >= self._capacity:
                if self.batch_waits and BATCH and self.group is None and self.checker is None \
                        and not self._submitting:
                    return self._hold(task)
                self._wait_for_room(s)
            start = self._host_t
            self._host_t = end = start + self.profile.launch_cost_us
        self._sim.submit(task, end)
        if self.checker is not None:
            self.checker.on_launch(task)
        self._launches.append(_new_launch(HostLaunch, (task, start, end)))   # HostLaunch(task, start, end), faster
        if self._allocator is not None and self._allocator.live:
            self._note_use(task)
        return task

    def graph_launch(self) -> GraphLaunch | None:
        """What ``launch`` does to a task in graph mode once the model execute has begun, in
        pieces for a launch loop (``runtime/launch.py``): the simulator's submit, the launch
        list's append and the model execute's (start, end). None where a launch would do more
        (held launches, a launch from the device, the hazard checker, a live allocator) or
        the model execute has not begun (the first launch stamps the host's clock)."""
        if not self.graph_mode or self._execute is None or self._held or self._on_device \
                or self.checker is not None or (self._allocator is not None and self._allocator.live):
            return None
        start, end = self._execute
        return self._sim.submit, self._launches.append, start, end

    def _note_use(self, task: DeviceTask) -> None:
        """The device's own allocator learns which streams use its blocks from the launches."""
        assert self._allocator is not None
        for ptr, _, _ in (*task.reads, *task.writes):
            self._allocator.note_use(ptr, task.stream)

    def _hold(self, task: DeviceTask) -> DeviceTask:
        """A launch onto a full queue (``batch_waits``): it is held, with every launch after
        it, until the host next looks at the device (its simulator, clock or launches, any
        wait) or ``BATCH_MAX`` are held; ``_submit_held`` then does for each what ``launch``
        would have done at its turn. Same waits, same clock, same submission order, so the
        same schedule, bit for bit; but the host's Python and the simulator's each run in
        one stretch, not in turns at every launch, which costs both of them far less."""
        self._held.append(task)
        if self._allocator is not None and self._allocator.live:
            self._note_use(task)   # the allocator's bookkeeping stays at the launch
        return task

    def _submit_held(self) -> None:
        """Each held launch in order, as ``launch`` would have made it: wait while its queue
        is full, stamp the host's clock, submit. Should a wait raise (a task's start failing
        in it), the launches after it go with it, as the host would have stopped there."""
        held, self._held = self._held, []
        sim, cap, cost, launches = self._sim, self._capacity, self.profile.launch_cost_us, self._launches
        self._submitting = True
        try:
            with self.quiet() if len(held) >= BATCH_QUIET else nullcontext():
                for task in held:
                    s = task.stream
                    if s.pending >= cap:
                        self._wait_for_room(s)
                    start = self._host_t
                    self._host_t = end = start + cost
                    sim.submit(task, end)
                    launches.append(_new_launch(HostLaunch, (task, start, end)))
        finally:
            self._submitting = False

    def flush(self) -> None:
        """Submit the held launches now: the host is about to change what they run under
        (a stream's core cap), which the plain launch would have found unchanged."""
        if self._held:
            self._submit_held()

    @contextmanager
    def on_device(self) -> Iterator[None]:
        """Launches made meanwhile come from a control task on the device (GE's stream
        switch activating streams loaded with the model): they enter their queues at the
        device's clock and cost the host nothing."""
        self.flush()
        self._on_device += 1
        try:
            yield
        finally:
            self._on_device -= 1

    @contextmanager
    def model_execute(self) -> Iterator[None]:
        """Launches made meanwhile are the tasks of one loaded graph (a captured graph's
        replay, a compiled plan run from eager code): one host call starts them all, as
        graph mode's ModelExecute, on a device that otherwise launches task by task."""
        self.flush()
        saved = self.graph_mode, self._execute
        self.graph_mode, self._execute = True, None
        try:
            yield
        finally:
            self.graph_mode, self._execute = saved

    def _launch_on_device(self, task: DeviceTask) -> DeviceTask:
        self._sim.submit(task, self._sim.now)
        if self.checker is not None:
            self.checker.on_launch(task)
        return task

    def _model_execute(self, stamp: bool = True) -> tuple[float, float]:
        """Graph mode: one host call (GE's ModelExecute) starts every loaded task; its (start,
        end), which the first launch stamps on the host's clock (``stamp`` False: a look only)."""
        if self._execute is None:
            execute = (self._host_t, self._host_t + self.profile.launch_cost_us)
            if not stamp:
                return execute
            self._execute, self._host_t = execute, execute[1]
        return self._execute

    def _wait_for_room(self, s: Stream) -> None:
        """The command queue is full: the host blocks until the device retires a task."""
        sim = self._sim
        try:
            sim.run_until(lambda: s.pending < self._capacity)
        except RuntimeError as exc:
            raise acl_error(RT_STREAM_TASK_FULL, f"stream {s.id} holds {s.pending} tasks "
                            "and none can complete") from exc
        if sim.now > self._host_t:
            self._host_t = sim.now

    def launch_kernel(self, stream: Stream, name: str, fn: Callable[[], Any] | None,
                      write: Callable[[Any], None] | None = None, **cost: Any) -> DeviceTask:
        """Enqueue a kernel: ``fn`` computes at start, ``write`` stores at end."""
        return self.launch(DeviceTask("kernel", stream, name, start_fn=fn, end_fn=write, **cost))

    def record_event(self, event: Event, stream: Stream) -> DeviceTask:
        task = DeviceTask("record", stream, f"record e{event.id}", unit="", event=event)
        self.launch(task)
        event.record_task = task
        return task

    def stream_wait_event(self, stream: Stream, event: Event) -> DeviceTask:
        if event.record_task is None:
            raise invalid_value(f"stream {stream.id} waits on event {event.id}, which was never recorded")
        task = DeviceTask("wait", stream, f"wait e{event.id}", unit="", event=EventSnapshot(event.record_task))
        return self.launch(task)

    def reset_event(self, event: Event, stream: Stream) -> DeviceTask:
        """Enqueue a reset; waits enqueued after it need a new record."""
        task = self.launch(DeviceTask("reset", stream, f"reset e{event.id}", unit="", event=event))
        event.record_task = None
        return task

    def memcpy_async(self, stream: Stream, nbytes: int, kind: str, copy: Callable[[], None] | None = None,
                     name: str = "memcpy", **extra: Any) -> DeviceTask:
        """Enqueue a copy; ``copy`` runs at its end unless ``start_fn``/``end_fn`` are given."""
        if copy is not None:
            extra.setdefault("end_fn", lambda _: copy())
        return self.launch(DeviceTask("memcpy", stream, name, unit="copy", bytes=float(nbytes),
                                      copy_kind=kind, **extra))

    def memcpy_sync(self, nbytes: int, kind: str, copy: Callable[[], None], *,
                    reads: Any = (), writes: Any = (), name: str = "memcpy") -> None:
        """A blocking copy done by the host at its clock: it costs host time, not stream time."""
        self.sim.advance_to(self.host_t)
        copy()
        bw = self._bandwidth(kind)
        end = self.host_t + self.profile.task_overhead_us + nbytes / bw
        if self.checker is not None:
            self.checker.on_host_access(HostOp(name, self.host_t, end), list(reads), list(writes))
        self.host_t = end

    def _bandwidth(self, kind: str) -> float:
        """A blocking copy's bytes per us, kept per kind for this profile (the profile is
        frozen; working it out cost a copy more than the rest of ``memcpy_sync``)."""
        known = self._bandwidths
        if known is None or known[0] is not self.profile:
            known = self._bandwidths = (self.profile, {})
        bw = known[1].get(kind)
        if bw is None:
            bw = known[1][kind] = HOST_COPY_BYTES_PER_US if kind == "h2h" else self.profile.copy_bytes_per_us(kind)
        return bw

    # ---- synchronization ------------------------------------------------------------
    def _block(self, cond: Callable[[], bool], what: str) -> None:
        """Run the simulation until ``cond`` holds; one that never can (a collective whose
        other ranks never called it, on a server) times out as the real synchronize would."""
        try:
            self.sim.run_until(cond)
        except RuntimeError as exc:
            if self.group is None:   # one device alone cannot be left waiting by a user: a bug
                raise
            raise acl_error(RT_STREAM_SYNC_TIMEOUT, f"{what} can never finish: it waits on work that nothing "
                            "will complete (a collective another rank never joined?)") from exc

    def synchronize_stream(self, stream: Stream) -> None:
        self._block(lambda: stream.pending == 0, f"stream {stream.id} of device {self.id}")
        self.host_t = max(self.host_t, self.sim.now + (self.profile.sync_return_us or 0.0))
        if self.checker is not None:
            self.checker.sync_stream(stream)

    def synchronize_device(self) -> None:
        self._block(self.sim.idle, f"device {self.id}")
        self.host_t = max(self.host_t, self.sim.now + (self.profile.sync_return_us or 0.0))
        if self.checker is not None:
            self.checker.sync_device([s for s in self.sim.streams if not s.destroyed])

    def synchronize_event(self, event: Event) -> None:
        """Block until the newest record of ``event`` has run (at once if never recorded)."""
        task = event.record_task
        if task is None:
            return
        self._block(lambda: task.end_t is not None, f"event {event.id} of device {self.id}")
        self.host_t = max(self.host_t, task.end_t + (self.profile.sync_return_us or 0.0))
        if self.checker is not None:
            self.checker.sync_record(task)

    def event_complete(self, event: Event) -> bool:
        """Whether the newest record of ``event`` has run by the host's clock."""
        self.sim.advance_to(self.host_t)
        task = event.record_task
        done = task is None or (task.end_t is not None and task.end_t <= self.host_t)
        if done and task is not None and self.checker is not None:
            self.checker.sync_record(task)
        return done

    def view(self, ptr: int, dtype: np.dtype | str, shape: tuple[int, ...]) -> np.ndarray:
        return self.memory.view(ptr, dtype, shape)

    def timeline(self) -> list[dict[str, Any]]:
        """Every finished task: enqueue, start and end times (us), stream and cores used; a
        copy or collective also its bytes and the link it crossed (``link``: None on chip)."""
        return [{"name": t.name, "kind": t.kind, "stream": t.stream.id, "enqueue": t.enqueue_t,
                 "start": t.start_t, "end": t.end_t, "cores": t.max_cores, "block_dim": t.block_dim,
                 "bytes": t.bytes, "link": t.meta.get("link")}
                for t in self.sim.finished]

