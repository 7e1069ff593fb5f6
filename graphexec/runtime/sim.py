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
from dataclasses import dataclass, field
from typing import Any, Callable

from graphexec.runtime.core_pools import INF, Cohort, CorePools
from graphexec.runtime.profiles import DeviceProfile
from graphexec.runtime.samples import Sample, build_samples
from graphexec.runtime.sim_group import SimGroup
from graphexec.runtime.waves import run_shared_waves, run_waves

__all__ = ["DeviceTask", "HOST_COPY_BYTES_PER_US", "SimGroup", "Simulator"]

HOST_COPY_BYTES_PER_US = 10e3   # assumption: a host-to-host memcpy runs at ~10 GB/s
FAST_WAVES = True   # run a lone kernel's waves in one loop (``waves.py``); False: one step per wave


@dataclass(eq=False, slots=True)
class DeviceTask:
    """One entry of a stream's command queue.

    ``start_fn`` runs when the task starts (a kernel reads and computes then) and its
    return value goes to ``end_fn`` when the task ends (the kernel's writes).
    ``reads``/``writes`` are ``(ptr, nbytes, name)`` ranges for the hazard checker.
    """

    kind: str                       # "kernel", "memcpy", "record", "wait", "reset", "callback", "control"
    stream: Any
    name: str = ""
    unit: str = "vector"            # "cube", "vector", "aicpu", "copy" or "" for control tasks
    block_dim: int = 1
    flops: float = 0.0
    bytes: float = 0.0
    dtype: str = "float16"
    copy_kind: str = "d2d"
    event: Any = None
    start_fn: Callable[[], Any] | None = None
    end_fn: Callable[[Any], None] | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    reads: tuple | list = ()
    writes: tuple | list = ()
    seq: int = 0
    enqueue_t: float = 0.0
    start_t: float | None = None
    end_t: float | None = None
    blocks_left: int = 0
    blocks_running: int = 0
    block_us: float = 0.0
    block_bytes: float = 0.0
    ready_t: float = 0.0
    result: Any = None
    max_cores: int = 0
    driver: Any = None              # decides when the task ends (a peer copy's link, a collective)
    pool: str = ""                  # the core pool its blocks run on (set when it starts)

    @property
    def done(self) -> bool:
        return self.end_t is not None


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
        self._timers: list[tuple[float, int, Callable[[Any], None] | None, Any]] = []
        self._seq = itertools.count()
        self.streams: list[Any] = []
        aicpu = profile.aicpu_cores
        pools = ({"aicore": profile.ai_cores} if profile.coupled
                 else {"cube": profile.ai_cores, "vector": profile.vector_cores})
        self.cores = CorePools({**pools, "aicpu": aicpu}, profile.hbm_bytes_per_us)
        self._copy_free: dict[str, float] = {}
        self._peaks: dict[tuple[str, str], float] = {}
        self._pool = {u: self.pool_of(u) for u in ("cube", "vector", "aicpu")}
        self._overhead = profile.task_overhead_us
        self._active: list[DeviceTask] = []      # kernels with blocks not yet placed
        self._dirty: set[Any] = set()            # streams whose head may start now
        self._blocked: dict[Any, list[Any]] = {}   # record task -> streams whose head waits on it
        self.queued = 0                          # submitted and not finished
        self.finished: list[DeviceTask] = []
        self._fast = FAST_WAVES

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
            heapq.heappush(self._timers, (at, next(self._seq), self._dirty.add, s))

    def _at(self, t: float, fn: Callable[[Any], None], arg: Any) -> None:
        heapq.heappush(self._timers, (t, next(self._seq), fn, arg))

    def run_until(self, cond: Callable[[], bool]) -> float:
        """Advance simulated time until ``cond()`` holds; return the time it held."""
        if self.group is not None:
            return self.group.run_until(cond)
        while not cond():
            if not self._step(INF):
                raise RuntimeError("simulation stalled: the condition can never hold")
        return self.now

    def advance_to(self, t: float) -> None:
        """Run everything that happens up to time ``t`` (the host's clock)."""
        if self.group is not None:
            self.group.advance_to(t)
            return
        while self._step(t):
            pass
        self.now = max(self.now, t)

    def next_t(self) -> float:
        """When this device's next event is due (INF: none)."""
        t = self._timers[0][0] if self._timers else INF
        return min(t, self.cores.next_t)

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
        timers, cores = self._timers, self.cores
        t_timer = timers[0][0] if timers else INF
        t = t_core = cores.next_t
        if t_core < t_timer:
            if t > limit:
                return False
        else:
            t = t_timer
            if t > limit or t == INF:
                return False
        if t_core < t_timer and t < horizon and self._fast:
            stop = t_timer if t_timer < horizon else horizon
            if run_waves(self, t, limit, stop) if len(cores.cohorts) == 1 else run_shared_waves(self, t, limit, stop):
                return True
        if t > self.now:
            self.now = t
        if t_core <= t:
            for cohort in cores.pop_done(t):   # ``_blocks_done``
                task = cohort.task
                task.blocks_running -= cohort.n
                if task.blocks_left == 0 and task.blocks_running == 0:
                    self._finish(task)
        while timers and timers[0][0] <= t:
            _, _, fn, arg = heapq.heappop(timers)
            if fn is None:   # a kernel's blocks are ready: they queue for cores by urgency
                if self._active:
                    bisect.insort(self._active, arg, key=_urgency)
                else:
                    self._active.append(arg)
            else:
                fn(arg)
        self._settle()
        return True

    def _settle(self) -> None:
        """Start what can start now, hand out free cores, and time the running blocks."""
        dirty = self._dirty
        while dirty:
            if len(dirty) == 1:
                self._run_stream(dirty.pop())
                continue
            ready = sorted(dirty, key=_by_priority)
            dirty.clear()
            for s in ready:
                self._run_stream(s)
        if self._active:
            self._fill_cores()
        cores = self.cores
        if cores.stale:
            if cores.cohorts:
                cores.retime()
            else:   # ``retime`` with nothing running
                cores.stale, cores.next_t = False, cores.t + INF

    def _run_stream(self, s: Any) -> None:
        while s.active is None and s.queue:
            head = s.queue[0]
            if head.enqueue_t > self.now:
                self._at(head.enqueue_t, self._dirty.add, s)
                return
            try:
                started = self._start(head)
            except BaseException:   # its start raised (a fault, Ctrl-C): it ends here, the clock stays usable
                s.queue.popleft()
                self._drop(head)
                raise
            if not started:   # a wait: only the record it binds to can let it start
                self._blocked.setdefault(head.event.record_task, []).append(s)
                return
            s.queue.popleft()

    # ---- task kinds ------------------------------------------------------------
    def _start(self, task: DeviceTask) -> bool:
        """Begin ``task`` if it can begin; control tasks complete on the spot."""
        kind = task.kind
        if kind == "kernel":   # the common case first
            task.start_t = self.now
            if task.start_fn is not None:
                task.result = task.start_fn()
            if task.driver is None:   # its blocks queue for cores once the task overhead has passed
                n = task.block_dim if task.block_dim > 1 else 1
                task.pool = self._pool.get(task.unit) or self.pool_of(task.unit)
                peak = self._peaks.get((task.unit, task.dtype)) or self._peak(task.unit, task.dtype)
                task.blocks_left = n
                task.block_us = task.flops / n / peak
                task.block_bytes = task.bytes / n
                task.ready_t = ready = self.now + self._overhead
                task.stream.active = task
                heapq.heappush(self._timers, (ready, next(self._seq), None, task))   # None: "ready"
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

    def _peak(self, unit: str, dtype: str) -> float:
        """Flops per microsecond of one core of ``unit`` at ``dtype`` (cached)."""
        peak = self.profile.unit_rate(unit, dtype)
        self._peaks[(unit, dtype)] = peak
        return peak

    def _copy_end(self, task: DeviceTask) -> float:
        """When a copy ends on its engine; one engine per direction, first come first served."""
        kind = task.copy_kind
        bw = HOST_COPY_BYTES_PER_US if kind == "h2h" else self.profile.copy_bytes_per_us(kind)
        start = max(self.now, self._copy_free.get(kind, 0.0))
        end = start + self.profile.task_overhead_us + task.bytes / bw
        self._copy_free[kind] = end
        return end

    def _fill_cores(self) -> None:
        """Hand free cores to waiting blocks, highest-priority stream first."""
        cores, now = self.cores, self.now
        free, log, cohorts = cores.free, cores.log, cores.cohorts
        placed = False
        for task in self._active:
            pool = task.pool
            n = free[pool]
            if n <= 0:
                continue
            if task.blocks_left < n:
                n = task.blocks_left
            limit = task.stream.core_limit
            if limit is not None and task.unit in limit:   # a stream runs one kernel at a time
                n = min(n, limit[task.unit] - task.blocks_running)
                if n <= 0:
                    continue
            if now > cores.t:   # ``CorePools.place``, unrolled
                if cohorts:
                    cores.advance(now)
                else:
                    cores.t = now
            free[pool] -= n
            log.append((now, pool, n))
            cohorts.append(Cohort(task, pool, n, task.block_us, task.block_bytes))
            cores.stale = True
            task.blocks_left -= n
            task.blocks_running += n
            if task.blocks_running > task.max_cores:
                task.max_cores = task.blocks_running
            placed = placed or task.blocks_left == 0
        if placed:   # every block placed: those kernels leave the queue
            self._active = [t for t in self._active if t.blocks_left]

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
