"""The simulator as it was before its fast paths (issue 20): the reference the fast one must
match bit for bit. A verbatim copy of ``runtime/core_pools.py`` and ``runtime/sim.py``'s
event loop at that time (``Simulator`` and ``SimGroup`` renamed ``Plain*``); the task,
stream and sample types are the package's own. Imported by ``test_sim_fast.py``; it holds
no tests itself.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import math
from typing import Any, Callable

from graphexec.runtime.kernel_time import kernel_time
from graphexec.runtime.profiles import DeviceProfile
from graphexec.runtime.samples import Sample, build_samples
from graphexec.runtime.sim import HOST_COPY_BYTES_PER_US, DeviceTask

INF = math.inf
MIN_BLOCK_US = 1e-3     # a block never takes less than a nanosecond
DONE_EPS = 1e-9         # remaining fraction below which a cohort counts as finished


class Cohort:
    """Blocks of one task that started together (and so end together)."""

    __slots__ = ("task", "pool", "n", "left", "time", "bytes", "demand", "rate")

    def __init__(self, task: Any, pool: str, n: int, time: float, nbytes: float) -> None:
        self.task, self.pool, self.n = task, pool, n
        self.left = 1.0                 # fraction of each block's work still to do
        self.time = max(time, MIN_BLOCK_US)
        self.bytes = nbytes
        self.demand = nbytes / self.time   # bytes/us one block needs to run at full compute speed
        self.rate = 1.0 / self.time


class CorePools:
    """Free cores per pool and the cohorts running on them."""

    def __init__(self, pools: dict[str, int], hbm_bytes_per_us: float) -> None:
        self.total = dict(pools)
        self.free = dict(pools)
        self.bw = hbm_bytes_per_us
        self.cohorts: list[Cohort] = []
        self.t = 0.0
        self.next_t = INF
        self.stale = False
        self.log: list[tuple[float, str, int]] = []   # (time, pool, +/- cores), for samples

    def busy(self, pool: str) -> int:
        return self.total[pool] - self.free[pool]

    def advance(self, now: float) -> None:
        """Account progress up to ``now`` at the current rates."""
        dt = now - self.t
        if dt > 0:
            for c in self.cohorts:
                c.left -= c.rate * dt
            self.t = now

    def place(self, task: Any, pool: str, n: int, now: float) -> None:
        """Start ``n`` blocks of ``task`` on ``pool`` at ``now``."""
        self.advance(now)
        self.free[pool] -= n
        self.log.append((now, pool, n))
        self.cohorts.append(Cohort(task, pool, n, task.block_us, task.block_bytes))
        self.stale = True

    def pop_done(self, now: float) -> list[Cohort]:
        """The cohorts finished by ``now``, removed and their cores freed."""
        self.advance(now)
        done = [c for c in self.cohorts if self._done(c, now)]
        if done:
            self.cohorts = [c for c in self.cohorts if not self._done(c, now)]
            for c in done:
                self.free[c.pool] += c.n
                self.log.append((now, c.pool, -c.n))
            self.stale = True
        return done

    @staticmethod
    def _done(c: Cohort, now: float) -> bool:
        # Late in a long run a remaining time can be below the clock's resolution (about
        # 7e-12 us at 2**15 us): its finish then rounds to ``now`` and time stops moving.
        return c.left <= DONE_EPS or now + c.left / c.rate <= now

    def retime(self) -> None:
        """Share HBM among running blocks (water-filling) and find the next finish.

        Callers check ``stale`` first: only a placement or a finish changes the shares.
        """
        self.stale = False
        cohorts = self.cohorts
        if len(cohorts) == 1:   # the common case of one task alone: no sharing to work out
            c = cohorts[0]
            c.rate = min(1.0 / c.time, self.bw / (c.n * c.bytes)) if c.bytes > 0 else 1.0 / c.time
            self.next_t = self.t + c.left / c.rate
            return
        users = sorted((c for c in self.cohorts if c.bytes > 0), key=lambda c: c.demand)
        bw, n = self.bw, sum(c.n for c in users)
        for c in users:
            alloc = min(c.demand, bw / n)
            c.rate = alloc / c.bytes
            bw -= alloc * c.n
            n -= c.n
        self.next_t = self.t + min((c.left / c.rate for c in self.cohorts), default=INF)


def _by_priority(s: Any) -> tuple[int, int]:
    return s.priority, s.id


def _urgency(t: DeviceTask) -> tuple[int, int]:
    return t.stream.priority, t.seq


class PlainSimulator:
    """Discrete-event core shared by every stream of one device."""

    def __init__(self, profile: DeviceProfile, group: "PlainSimGroup | None" = None) -> None:
        self.profile = profile
        self.group = group
        if group is not None:
            group.sims.append(self)
        self.now = 0.0
        self._timers: list[tuple[float, int, Callable[[Any], None], Any]] = []
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
        self._blocked: set[Any] = set()          # streams whose head waits on an event
        self.queued = 0                          # submitted and not finished
        self.finished: list[DeviceTask] = []

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
            self._at(at, self._dirty.add, s)

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
    def _step(self, limit: float) -> bool:
        """Handle everything due at the next event time, if it is <= ``limit``."""
        timers = self._timers
        t_timer = timers[0][0] if timers else INF
        t_core = self.cores.next_t
        t = t_timer if t_timer < t_core else t_core
        if t > limit or t == INF:
            return False
        if t > self.now:
            self.now = t
        if t_core <= t:
            for cohort in self.cores.pop_done(t):
                self._blocks_done(cohort)
        while timers and timers[0][0] <= t:
            _, _, fn, arg = heapq.heappop(timers)
            fn(arg)
        self._settle()
        return True

    def _settle(self) -> None:
        dirty = self._dirty
        while dirty:
            if len(dirty) == 1:
                self._run_stream(dirty.pop())
                continue
            ready = sorted(dirty, key=_by_priority)
            dirty.clear()
            for i, s in enumerate(ready):
                try:
                    self._run_stream(s)
                except BaseException:   # a start raised: the streams after it are woken again now
                    for later in ready[i + 1:]:
                        self._at(self.now, self._dirty.add, later)
                    raise
        if self._active:
            self._fill_cores()
        if self.cores.stale:
            self.cores.retime()

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
            if not started:
                self._blocked.add(s)
                return
            s.queue.popleft()

    # ---- task kinds ------------------------------------------------------------
    def _start(self, task: DeviceTask) -> bool:
        """Begin ``task`` if it can begin; control tasks complete on the spot."""
        kind = task.kind
        if kind == "wait" and not task.event.is_complete_at(self.now):
            return False
        task.start_t = self.now
        if task.start_fn is not None:
            task.result = task.start_fn()
        if task.driver is not None:   # its link or its collective ends it (``end_at``)
            task.stream.active = task
            task.driver.begin(task, self)
        elif kind == "kernel":
            self._start_kernel(task)
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
                self._wake_blocked()
        return True

    def _wake_blocked(self) -> None:
        """A record ran: streams blocked on a wait look again, on every device of the group
        (a stream may wait on another device's event)."""
        self._wake_here()
        if self.group is not None:
            for other in self.group.sims:
                if other is not self and other._blocked:
                    other.at(self.now, other._wake_here, None)

    def _wake_here(self, _: Any = None) -> None:
        """Another device's record ran: this device's blocked streams look again (and wake
        no one else: two devices with blocked streams would wake each other forever)."""
        self._dirty |= self._blocked
        self._blocked.clear()

    def _start_kernel(self, task: DeviceTask) -> None:
        task.blocks_left, task.block_us, task.block_bytes = kernel_time(self.profile, task.unit, task.dtype,
                                                                        task.flops, task.bytes, task.block_dim,
                                                                        task.meta)
        task.ready_t = self.now + self._overhead
        task.stream.active = task
        self._at(task.ready_t, self._ready, task)

    def _peak(self, unit: str, dtype: str) -> float:
        """Flops per microsecond of one core of ``unit`` at ``dtype`` (cached)."""
        peak = self.profile.unit_rate(unit, dtype)
        self._peaks[(unit, dtype)] = peak
        return peak

    def _ready(self, task: DeviceTask) -> None:
        if self._active:
            bisect.insort(self._active, task, key=_urgency)
        else:
            self._active.append(task)

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
        cores, now, pools = self.cores, self.now, self._pool
        for task in list(self._active):
            pool = pools.get(task.unit) or self.pool_of(task.unit)
            n = min(task.blocks_left, cores.free[pool])
            limit = task.stream.core_limit
            if limit is not None and task.unit in limit:   # a stream runs one kernel at a time
                n = min(n, limit[task.unit] - task.blocks_running)
            if n <= 0:
                continue
            cores.place(task, pool, n, now)
            task.blocks_left -= n
            task.blocks_running += n
            if task.blocks_running > task.max_cores:
                task.max_cores = task.blocks_running
            if task.blocks_left == 0:
                self._active.remove(task)

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
        self._drop(task)
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


class PlainSimGroup:
    """The simulators of a server's devices, stepped in one global time order: always the
    device whose next event is earliest, so whatever one device does to another (a copy
    over a link, a collective's end, an event) lands at or after that device's clock."""

    def __init__(self) -> None:
        self.sims: list[PlainSimulator] = []
        self.now = 0.0

    def _step(self, limit: float) -> bool:
        sim = min(self.sims, key=PlainSimulator.next_t, default=None)
        if sim is None or not sim._step(limit):
            return False
        self.now = max(self.now, sim.now)
        return True

    def run_until(self, cond: Callable[[], bool]) -> float:
        while not cond():
            if not self._step(INF):
                raise RuntimeError("simulation stalled: the condition can never hold")
        self._align(self.now)
        return self.now

    def advance_to(self, t: float) -> None:
        while self._step(t):
            pass
        self._align(max(self.now, t))

    def _align(self, t: float) -> None:
        """Every device's clock reads ``t``: nothing is due before it on any of them."""
        self.now = t
        for sim in self.sims:
            sim.now = max(sim.now, t)
