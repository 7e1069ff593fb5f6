"""The AI cores as a fluid model: blocks progress at rates set by a roofline.

A block needs ``time`` microseconds of compute on one core and moves ``bytes`` through
HBM. The bandwidth is shared max-min fairly by every block running at that moment: a
block that needs less than an equal share (compute-bound) gets what it needs, the rest
is split among the others. Rates change only when blocks start or end, so progress is
piecewise linear and exact. Blocks of one task placed at one instant form a cohort
that ends together, which keeps a 512-wave MatMul at 512 events rather than 16,384.

The event loop calls these methods thousands of times per run, so they are written for
speed (one pass over the cohorts, no per-call closures); every float is computed by the
same operations in the same order as the straightforward version (``tests/unit/runtime/
test_sim_fast_reference.py`` keeps it and the tests compare the two bit for bit).
"""

from __future__ import annotations

import math
from operator import attrgetter
from typing import Any

INF = math.inf
MIN_BLOCK_US = 1e-3     # a block never takes less than a nanosecond
DONE_EPS = 1e-9         # remaining fraction below which a cohort counts as finished

_demand = attrgetter("demand")


class Cohort:
    """Blocks of one task that started together (and so end together)."""

    __slots__ = ("task", "pool", "n", "left", "time", "bytes", "demand", "rate")

    def __init__(self, task: Any, pool: str, n: int, time: float, nbytes: float) -> None:
        self.task, self.pool, self.n = task, pool, n
        self.left = 1.0                 # fraction of each block's work still to do
        self.time = MIN_BLOCK_US if MIN_BLOCK_US > time else time   # max(time, MIN_BLOCK_US)
        self.bytes = nbytes
        self.demand = nbytes / self.time   # bytes/us one block needs to run at full compute speed
        self.rate = 1.0 / self.time

    def solo_rate(self, bw: float) -> float:
        """Its rate alone on the device: the roofline of its blocks against all of HBM."""
        if self.bytes > 0:
            r, share = 1.0 / self.time, bw / (self.n * self.bytes)
            return share if share < r else r
        return 1.0 / self.time


def finished(c: Cohort, now: float) -> bool:
    """Whether ``c`` is done at ``now``. Late in a long run a remaining time can be below
    the clock's resolution (about 7e-12 us at 2**15 us): its finish then rounds to ``now``
    and time would stop moving, so that counts as done too."""
    return c.left <= DONE_EPS or now + c.left / c.rate <= now


_init_cohort = Cohort.__init__   # run on a finished cohort: a new one, without allocating


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
        self.spares: list[Cohort] = []   # finished cohorts no one holds, to reuse

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
        if now > self.t:
            self.advance(now)
        self.free[pool] -= n
        self.log.append((now, pool, n))
        self.cohorts.append(Cohort(task, pool, n, task.block_us, task.block_bytes))
        self.stale = True

    def pop_done(self, now: float) -> list[Cohort]:
        """The cohorts finished by ``now``, removed and their cores freed."""
        cohorts = self.cohorts
        if len(cohorts) == 1:   # one cohort: no lists to filter
            c = cohorts[0]
            dt = now - self.t
            if dt > 0:
                c.left -= c.rate * dt
                self.t = now
            if not (c.left <= DONE_EPS or now + c.left / c.rate <= now):
                return []
            self.cohorts = []
            self.free[c.pool] += c.n
            self.log.append((now, c.pool, -c.n))
            self.stale = True
            return cohorts
        dt = now - self.t
        if dt > 0:   # ``advance``
            for c in cohorts:
                c.left -= c.rate * dt
            self.t = now
        done: list[Cohort] = []
        keep: list[Cohort] = []
        for c in cohorts:
            if c.left <= DONE_EPS or now + c.left / c.rate <= now:
                done.append(c)
            else:
                keep.append(c)
        if done:
            self.cohorts = keep
            free, log = self.free, self.log
            for c in done:
                free[c.pool] += c.n
                log.append((now, c.pool, -c.n))
            self.stale = True
        return done

    def retime(self) -> None:
        """Share HBM among running blocks (water-filling) and find the next finish.

        Callers check ``stale`` first: only a placement or a finish changes the shares.
        """
        self.stale = False
        cohorts = self.cohorts
        if len(cohorts) == 1:   # the common case of one task alone: no sharing to work out
            c = cohorts[0]
            if c.bytes > 0:   # ``solo_rate``, unrolled
                r, share = 1.0 / c.time, self.bw / (c.n * c.bytes)
                c.rate = rate = share if share < r else r
            else:
                c.rate = rate = 1.0 / c.time
            self.next_t = self.t + c.left / rate
            return
        if not cohorts:
            self.next_t = self.t + INF
            return
        users, n = [], 0
        for c in cohorts:
            if c.bytes > 0:
                users.append(c)
                n += c.n
        users.sort(key=_demand)   # stable: equal demands keep the cohorts' order
        bw = self.bw
        for c in users:
            share = bw / n
            alloc = share if share < c.demand else c.demand   # min(demand, share), ties alike
            c.rate = alloc / c.bytes
            bw -= alloc * c.n
            n -= c.n
        self.next_t = self.t + first_end(cohorts)

    def fill(self, active: list[Any], now: float) -> None:
        """Hand free cores to the waiting kernels ``active`` (in urgency order) at ``now``;
        those with every block placed leave the list (in place: the caller holds it)."""
        free, log, cohorts = self.free, self.log, self.cohorts
        placed = 0
        for task in active:
            pool = task.pool
            n = free[pool]
            if n <= 0:
                continue
            left = task.blocks_left
            if left < n:
                n = left
            limit = task.stream.core_limit
            if limit is not None and task.unit in limit:   # a stream runs one kernel at a time
                n = min(n, limit[task.unit] - task.blocks_running)
                if n <= 0:
                    continue
            if now > self.t:   # ``place``, unrolled
                if cohorts:
                    self.advance(now)
                else:
                    self.t = now
            free[pool] -= n
            log.append((now, pool, n))
            if self.spares:
                c = self.spares.pop()
                _init_cohort(c, task, pool, n, task.block_us, task.block_bytes)
            else:
                c = Cohort(task, pool, n, task.block_us, task.block_bytes)
            cohorts.append(c)
            self.stale = True
            task.blocks_left = left = left - n
            task.blocks_running = running = task.blocks_running + n
            if running > task.max_cores:
                task.max_cores = running
            if left == 0:
                placed += 1
        if placed:
            if placed == len(active):
                active.clear()
            else:
                active[:] = [t for t in active if t.blocks_left]

    def place_alone(self, task: Any, now: float) -> bool:
        """``fill`` of one kernel on idle cores, then its ``retime`` (the same operations in
        order); True when blocks of it still wait for cores."""
        free, pool = self.free, task.pool
        n, left = free[pool], task.blocks_left
        if left < n:
            n = left
        limit = task.stream.core_limit
        if limit is not None and task.unit in limit:
            n = min(n, limit[task.unit] - task.blocks_running)
        if n <= 0:   # no core it may take: it waits
            return True
        if now > self.t:
            self.t = now
        free[pool] -= n
        self.log.append((now, pool, n))
        block_us, nbytes, spares = task.block_us, task.block_bytes, self.spares
        if spares:   # ``Cohort.__init__`` on a spare, written out
            c = spares.pop()
            c.task, c.pool, c.n = task, pool, n
            c.left = 1.0
            c.time = time = MIN_BLOCK_US if MIN_BLOCK_US > block_us else block_us
            c.bytes = nbytes
            c.demand = nbytes / time
            c.rate = 1.0 / time
        else:
            c = Cohort(task, pool, n, block_us, nbytes)
            time = c.time
        self.cohorts.append(c)
        task.blocks_left = left = left - n
        task.blocks_running = running = task.blocks_running + n
        if running > task.max_cores:
            task.max_cores = running
        self.stale = False   # ``retime`` of one cohort
        if nbytes > 0:   # ``solo_rate``
            r, share = 1.0 / time, self.bw / (n * nbytes)
            c.rate = rate = share if share < r else r
        else:
            c.rate = rate = 1.0 / time
        self.next_t = self.t + c.left / rate
        return left > 0


def first_end(cohorts: list[Cohort]) -> float:
    """The least time left of ``cohorts`` at their rates (``min`` of the same quotients)."""
    m = INF
    for c in cohorts:
        x = c.left / c.rate
        if x < m:
            m = x
    return m
