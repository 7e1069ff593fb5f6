"""The device simulation: a deterministic discrete-event model of the hardware scheduler.

The host enqueues tasks with a timestamp (its own clock). The device side is advanced
lazily, only as far as the host blocks (synchronize, a full command queue, a blocking
copy), which is exact: nothing the host does later can change what the device did
before that time.

Each stream runs its tasks in FIFO order, one at a time. A kernel's blocks go onto free
cores of its unit, highest-priority stream first, never preempted; a kernel with more
blocks than free cores runs in waves (``_cores.py`` times the blocks). Copies run on one
copy engine per direction at that direction's bandwidth. Kernels read their inputs when
they start and write their outputs when they end, so the numbers follow simulated time.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
from collections import deque
from typing import Any, Callable

from graphexec import _switch
from graphexec.runtime.core_pools import INF, CorePools
from graphexec.runtime.kernel_time import task_time
from graphexec.runtime.profiles import DeviceProfile
from graphexec.runtime.samples import Sample, build_samples
from graphexec.runtime.sim_group import SimGroup
from graphexec.runtime.sim_loop import drive
from graphexec.runtime.sim_task import DeviceTask
from graphexec.runtime.waves import run_shared_waves, run_waves

__all__ = ["DeviceTask", "HOST_COPY_BYTES_PER_US", "SimGroup", "Simulator"]

HOST_COPY_BYTES_PER_US = 10e3   # assumption: a host-to-host memcpy runs at ~10 GB/s
FAST_WAVES = True   # run a lone kernel's waves in one loop (``waves.py``); False: one step per wave


def _by_priority(s: Any) -> tuple[int, int]:
    return s.priority, s.id


def _urgency(t: DeviceTask) -> tuple[int, int]:
    return t.stream.priority, t.seq


class Simulator:
    """Discrete-event core shared by every stream of one device."""

    def __init__(self, profile: DeviceProfile, group: SimGroup | None = None) -> None:
        self.profile = profile
        self.group = group
        if group is not None:
            group.sims.append(self)
        self.now = 0.0
        self._timers: list[tuple[float, int, Callable[[Any], None], Any]] = []
        # kernels whose blocks become ready: (time, seq, task). Each is pushed at the clock
        # plus the constant task overhead and the clock never goes back, so they come due in
        # the order pushed: a FIFO, merged with the heap by (time, seq) as one heap would be
        self._ready: deque[tuple[float, int, DeviceTask]] = deque()
        self._seq = itertools.count()
        self.streams: list[Any] = []
        aicpu = profile.aicpu_cores
        pools = ({"aicore": profile.ai_cores} if profile.coupled
                 else {"cube": profile.ai_cores, "vector": profile.vector_cores})
        self.cores = CorePools({**pools, "aicpu": aicpu}, profile.hbm_bytes_per_us)
        self._copy_free: dict[str, float] = {}
        self._kinds: dict[tuple[str, str], tuple[str, float]] = {}   # (unit, dtype) -> (pool, peak)
        self._times: dict[tuple[Any, ...], Any] = {}   # kernel_time by a task's cost fields (``task_time``)
        self._pool = {u: self.pool_of(u) for u in ("cube", "vector", "aicpu")}
        self._overhead = profile.task_overhead_us
        self._active: list[DeviceTask] = []      # kernels with blocks not yet placed
        self._dirty: set[Any] = set()            # streams whose head may start now
        self._wake = self._dirty.add             # a stream's wake-up timer calls this one object (``sim_loop``)
        self._blocked: dict[Any, list[Any]] = {}   # record task -> streams whose head waits on it
        self.queued = 0                          # submitted and not finished
        self.finished: list[DeviceTask] = []
        self._fast = FAST_WAVES and _switch.FAST

    def renew(self) -> bool:
        """Make this simulator a fresh one again if nothing was ever submitted to it (only its
        streams and clock moved, as on a replayed run, which throws it away: ``Device.reset_run``'s
        ``spare``). False, nothing changed: it ran something, a new ``Simulator`` is needed."""
        cores = self.cores
        if self.queued or self.finished or self._timers or self._ready or self._active or self._copy_free \
                or cores.log or cores.cohorts or cores.t or self.group is not None:
            return False
        self.streams.clear()
        self.now = 0.0
        self._seq = itertools.count()
        self._dirty.clear()
        self._blocked.clear()
        self._fast = FAST_WAVES and _switch.FAST
        return True

    def pool_of(self, unit: str) -> str:
        return "aicore" if self.profile.coupled and unit in ("cube", "vector") else unit

    # ---- host side -------------------------------------------------------------
    def submit(self, task: DeviceTask, at: float) -> None:
        """Put ``task`` at the tail of its stream's queue at host time ``at``."""
        s = task.stream
        task.seq = next(self._seq)
        task.enqueue_t = at
        s.queue.append(task)
        s.pending += 1
        self.queued += 1
        if s.active is None and len(s.queue) == 1:
            heapq.heappush(self._timers, (at, next(self._seq), self._wake, s))

    def _at(self, t: float, fn: Callable[[Any], None], arg: Any) -> None:
        heapq.heappush(self._timers, (t, next(self._seq), fn, arg))

    def run_until(self, cond: Callable[[], bool]) -> float:
        """Advance simulated time until ``cond()`` holds; return the time it held."""
        if self.group is not None:
            return self.group.run_until(cond)
        if not drive(self, INF, cond):   # ``while not cond(): self._step(INF)``, faster (``sim_loop.py``)
            raise RuntimeError("simulation stalled: the condition can never hold")
        return self.now

    def advance_to(self, t: float) -> None:
        """Run everything that happens up to time ``t`` (the host's clock)."""
        if self.group is not None:
            self.group.advance_to(t)
            return
        drive(self, t, None)   # ``while self._step(t): pass``
        self.now = max(self.now, t)

    def next_t(self) -> float:
        """When this device's next event is due (INF: none)."""
        t = self._timers[0][0] if self._timers else INF
        if self._ready and self._ready[0][0] < t:
            t = self._ready[0][0]
        c = self.cores.next_t
        return c if c < t else t

    def at(self, t: float, fn: Callable[[Any], None], arg: Any) -> None:
        """Call ``fn(arg)`` at simulated time ``t`` (another device's or the fabric's doing)."""
        self._at(max(t, self.now), fn, arg)

    def end_at(self, task: DeviceTask, t: float) -> None:
        """End a driven task at time ``t`` (its driver decided when)."""
        self.at(t, self._finish, task)

    def idle(self) -> bool:
        """True when no stream has queued or running work."""
        return self.queued == 0

    # ---- the event loop ----------------------------------------------------------
    def _step(self, limit: float, horizon: float = INF) -> bool:
        """Handle everything due at the next event time, if it is <= ``limit``; a lone
        kernel's wave ends before the next timer and before ``horizon`` (another device's
        next event) may all go at once (``waves.py``)."""
        timers, ready, cores = self._timers, self._ready, self.cores
        t_timer = timers[0][0] if timers else INF
        if ready and ready[0][0] < t_timer:
            t_timer = ready[0][0]
        t = cores.next_t
        if t < t_timer:   # blocks end, no timer is due
            if t > limit:
                return False
            cohorts = cores.cohorts
            if t < horizon and self._fast:   # the waves' own first checks here, where they are cheap
                stop = t_timer if t_timer < horizon else horizon
                if len(cohorts) == 1:
                    if cohorts[0].task.blocks_left > 0 and run_waves(self, t, limit, stop):
                        return True
                elif self._active and run_shared_waves(self, t, limit, stop):
                    return True
            if t > self.now:
                self.now = t
            done = cores.pop_done(t)
            for c in done:
                self._blocks_done(c)
            cores.spares += done
            if (timers and timers[0][0] <= t) or (ready and ready[0][0] <= t):   # an end's doing
                self._due(t)
        else:
            t = t_timer
            if t > limit or t == INF:
                return False
            if t > self.now:
                self.now = t
            if not cores.cohorts:
                if (not self._active and ready and ready[0][0] <= t and not (timers and timers[0][0] <= t)
                        and (len(ready) == 1 or ready[1][0] > t) and not self._dirty):
                    task = ready.popleft()[2]   # the one thing due: a kernel's blocks, on an idle device
                    if cores.place_alone(task, t):
                        self._active.append(task)
                    return True
            elif cores.next_t <= t:
                for c in cores.pop_done(t):
                    self._blocks_done(c)
            self._due(t)
        self._settle()
        return True

    def _due(self, t: float) -> None:
        """Run the timers due by ``t`` in (time, seq) order across the heap and the FIFO."""
        timers, ready, active = self._timers, self._ready, self._active
        while True:
            if ready and ready[0][0] <= t and not (timers and timers[0] < ready[0]):
                task = ready.popleft()[2]   # a kernel's blocks are ready: they queue for cores by urgency
                if active:
                    bisect.insort(active, task, key=_urgency)
                else:
                    active.append(task)
            elif timers and timers[0][0] <= t:
                _, _, fn, arg = heapq.heappop(timers)
                fn(arg)
            else:
                return

    def _settle(self) -> None:
        """Start what can start now, hand out free cores, and time the running blocks."""
        dirty = self._dirty
        while dirty:
            if len(dirty) == 1:
                self._run_stream(dirty.pop())
                continue
            streams = sorted(dirty, key=_by_priority)
            dirty.clear()
            for i, s in enumerate(streams):
                try:
                    self._run_stream(s)
                except BaseException:   # a start raised: the streams after it are woken again now
                    for later in streams[i + 1:]:
                        self._at(self.now, self._wake, later)
                    raise
        if self._active:
            self.cores.fill(self._active, self.now)
        cores = self.cores
        if cores.stale:
            cohorts = cores.cohorts
            if len(cohorts) == 1:   # ``retime`` of one cohort, unrolled
                cores.stale = False
                c = cohorts[0]
                if c.bytes > 0:   # ``solo_rate``
                    r, share = 1.0 / c.time, cores.bw / (c.n * c.bytes)
                    c.rate = rate = share if share < r else r
                else:
                    c.rate = rate = 1.0 / c.time
                cores.next_t = cores.t + c.left / rate
            elif cohorts:
                cores.retime()
            else:   # ``retime`` with nothing running
                cores.stale, cores.next_t = False, cores.t + INF

    def _run_stream(self, s: Any) -> None:
        queue, now = s.queue, self.now
        while s.active is None and queue:
            head = queue[0]
            if head.enqueue_t > now:
                self._at(head.enqueue_t, self._wake, s)
                return
            try:
                if head.kind == "kernel" and head.driver is None:   # ``_start`` of a kernel, unrolled
                    head.start_t = now
                    if head.start_fn is not None:
                        head.result = head.start_fn()
                    self._queue_blocks(head, now)
                    queue.popleft()
                    return   # its stream is busy now
                started = self._start(head)
            except BaseException:   # its start raised (a fault, Ctrl-C): it ends here, the clock stays usable
                queue.popleft()
                self._drop(head)
                raise
            if not started:   # a wait: only the record it binds to can let it start
                self._blocked.setdefault(head.event.record_task, []).append(s)
                return
            queue.popleft()

    # ---- task kinds ------------------------------------------------------------
    def _start(self, task: DeviceTask) -> bool:
        """Begin ``task`` if it can begin; control tasks complete on the spot."""
        kind = task.kind
        if kind == "kernel":   # the common case first
            task.start_t = self.now
            if task.start_fn is not None:
                task.result = task.start_fn()
            if task.driver is None:
                self._queue_blocks(task, self.now)
                return True
        elif kind == "wait" and not task.event.is_complete_at(self.now):
            return False
        else:
            task.start_t = self.now
            if task.start_fn is not None:
                task.result = task.start_fn()
        if task.driver is not None:   # its link or its collective ends it (``end_at``)
            task.stream.active = task
            task.driver.begin(task, self)
        elif kind == "memcpy":
            task.stream.active = task
            self._at(self._copy_end(task), self._finish, task)
        elif kind == "control":    # a stream switch: its body runs on other streams meanwhile
            task.stream.active = task
            self._at(self.now + self._overhead, self._switch, task)
        elif kind == "callback" and task.meta.get("block", True):
            task.stream.active = task
            self._at(self.now + self.profile.launch_cost_us, self._finish, task)
        else:   # record, wait, reset and non-blocking callbacks take no device time
            self._finish(task)
            if kind == "record":
                self._wake_blocked(task)
        return True

    def _queue_blocks(self, task: DeviceTask, now: float) -> None:
        """A kernel has started: its blocks queue for cores once the task overhead has passed."""
        unit = task.unit
        kind = self._kinds.get((unit, task.dtype)) or self._kind(unit, task.dtype)
        task.pool = kind[0]
        task.blocks_left, task.block_us, task.block_bytes = task_time(self._times, self.profile, task)
        task.ready_t = ready = now + self._overhead
        task.stream.active = task
        self._ready.append((ready, next(self._seq), task))

    def _wake_blocked(self, record: DeviceTask) -> None:
        """``record`` ran: the streams blocked on a wait for it look again, on every device
        of the group (a stream may wait on another device's event). Only those: waking
        every blocked stream at every record was quadratic in the streams of a long graph."""
        self._wake_here(record)
        if self.group is not None:
            for other in self.group.sims:
                if other is not self and record in other._blocked:
                    other.at(self.now, other._wake_here, record)

    def _wake_here(self, record: DeviceTask) -> None:
        """The streams of this device blocked on ``record`` look again (and wake no one
        else: two devices with blocked streams would wake each other forever)."""
        streams = self._blocked.pop(record, None)
        if streams is not None:
            self._dirty.update(streams)

    def _kind(self, unit: str, dtype: str) -> tuple[str, float]:
        """The pool of ``unit`` and the flops per microsecond of one of its cores at ``dtype`` (cached)."""
        kind = self._kinds[(unit, dtype)] = (self._pool.get(unit) or self.pool_of(unit),
                                             self.profile.unit_rate(unit, dtype))
        return kind

    def _copy_end(self, task: DeviceTask) -> float:
        """When a copy ends on its engine; one engine per direction, first come first served."""
        kind = task.copy_kind
        bw = HOST_COPY_BYTES_PER_US if kind == "h2h" else self.profile.copy_bytes_per_us(kind)
        start = max(self.now, self._copy_free.get(kind, 0.0))
        end = start + self.profile.task_overhead_us + task.bytes / bw
        self._copy_free[kind] = end
        return end

    def _blocks_done(self, cohort: Any) -> None:
        task = cohort.task
        task.blocks_running -= cohort.n
        if task.blocks_left == 0 and task.blocks_running == 0:
            self._finish(task)

    def _switch(self, task: DeviceTask) -> None:
        """A control task's switch: its controller reads what it needs from device memory
        and launches its next body run, or ends the task."""
        if not task.meta["control"].step(task):
            self._finish(task)

    def resume(self, task: DeviceTask, delay_us: float = 0.0) -> None:
        """The body run a control task launched has finished: its next switch (a label
        goto back to it) comes after the task overhead plus ``delay_us`` (its copies)."""
        self._at(self.now + self._overhead + delay_us, self._switch, task)

    def _finish(self, task: DeviceTask) -> None:
        end, result = task.end_fn, task.result
        now = self.now   # ``_drop``, unrolled
        task.end_t = now
        task.result = task.start_fn = task.end_fn = None
        s = task.stream
        if s.active is task:
            s.active = None
        s.last_end = now
        s.pending -= 1
        self.queued -= 1
        self._dirty.add(s)
        self.finished.append(task)
        if end is not None:   # last: should it raise, the task and its stream are already done with
            end(result)

    def _drop(self, task: DeviceTask) -> None:
        """``task`` leaves its stream now (finished, or failed at its start)."""
        task.end_t = self.now
        task.result = task.start_fn = task.end_fn = None   # done: drop the closures and data
        s = task.stream
        if s.active is task:
            s.active = None
        s.last_end = self.now
        s.pending -= 1
        self.queued -= 1
        self._dirty.add(s)

    @property
    def samples(self) -> list[Sample]:
        """Busy cores and queued tasks after each change (rebuilt from logs on demand)."""
        return build_samples(self)
