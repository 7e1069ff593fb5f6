"""A kernel's waves in one tight loop, while it is alone on the device.

A kernel with more blocks than free cores runs in waves: each wave's cohort ends, its
cores go back to the same kernel and the next wave starts at once. Stepped one event at
a time, every wave costs a whole simulator step (pop, settle, fill, retime). When that
kernel's cohort is the only one running, it is first in line for its pool, and no timer
(nor another device of the group) comes before the next wave ends, nothing else can
happen in between, so the waves run here back to back. Each wave does exactly what the
step would have done, with the same float operations in the same order (the cohort's
progress, the solo rate, the next finish); a long run of equal waves is one
``itertools.accumulate`` of the same sums, which adds in sequence. A wave that gives back and
takes the same number of cores changes no busy count, so it logs nothing (samples are
the same). The last placement stops the loop; the kernel's end is an ordinary step.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from itertools import accumulate, repeat
from math import ulp
from typing import Any

from graphexec.runtime.core_pools import DONE_EPS, INF

CLOSED_FORM_WAVES = 2    # equal waves ahead from which the closed form (a loop, or a list from ACCUMULATE_WAVES) pays
ACCUMULATE_WAVES = 10    # equal waves from which one list of their ends is cheaper than a loop
CHUNK = 4096             # equal waves worked out per list (the host may stop the run early)


def run_waves(sim: Any, t: float, limit: float, stop: float) -> bool:
    """Run the lone cohort's wave ends from ``t`` (its finish) while each is <= ``limit``
    and < ``stop``; False when the first cannot be run here (the plain step does it)."""
    cores = sim.cores
    c = cores.cohorts[0]
    task = c.task
    active = sim._active
    if task.blocks_left <= 0 or sim._dirty or not active or active[0] is not task:
        return False
    pool = c.pool
    crowded = len(active) > 1 and any(u.pool == pool for u in active[1:])   # others wait for the cores it leaves
    limits = task.stream.core_limit
    cap = limits[task.unit] if limits is not None and task.unit in limits else None
    free, log, bw = cores.free, cores.log, cores.bw
    moved, rate_n, rate, d = False, 0, 0.0, 0.0
    while True:
        dt = t - cores.t
        rest = c.left - c.rate * dt if dt > 0 else c.left   # ``CorePools.advance``
        if not (rest <= DONE_EPS or t + rest / c.rate <= t):
            return moved
        n_old, left = c.n, task.blocks_left
        avail = free[pool] + n_old
        n = left if left < avail else avail
        if cap is not None and cap < n:   # its stream's cap, none of its blocks running now
            n = cap
        if n <= 0 or (crowded and avail > n):
            return moved
        if t > sim.now:
            sim.now = t
        if dt > 0:
            cores.t = t
        if n != n_old:
            free[pool] = avail - n
            log.append((t, pool, -n_old))
            log.append((t, pool, n))
            if n > task.max_cores:
                task.max_cores = n
            c.n = n
        task.blocks_left = left = left - n
        task.blocks_running = n
        c.left = 1.0      # the next wave's cohort: same task, so same time and bytes
        if n != rate_n:
            rate_n, rate = n, c.solo_rate(bw)
            d = 1.0 / rate
        c.rate = rate
        cores.next_t = t_next = t + d   # ``retime``: its start plus left / rate
        cores.stale = False
        moved = True
        if left == 0:   # all placed: the kernel leaves the queue, its end is an ordinary step
            del active[0]
            return True
        if not (t_next < stop and t_next <= limit):
            return True
        if left // n >= CLOSED_FORM_WAVES:   # crowded or not: it took every core it freed
            t_next = _equal_waves(sim, task, t, d, rate, left // n, limit, stop)
            if task.blocks_left == 0:
                del active[0]
                return True
            if not (t_next < stop and t_next <= limit):
                return True
        t = t_next


def _equal_waves(sim: Any, task: Any, t: float, d: float, rate: float, waves: int,
                 limit: float, stop: float) -> float:
    """Up to ``waves`` wave ends after the cohort placed at ``t``, each placing as many
    blocks as it frees (so nothing changes but the clock): the plain steps' sums, and
    their done checks where a bound says they all pass. Returns the next finish.

    The ends are ``t + d``, ``+ d``, ... added in order (``accumulate`` does the same adds).
    A wave's remaining fraction at its end is ``1 - rate * dt`` with ``dt`` within one ulp
    of the latest end from ``d`` and ``rate * d`` within 2**-53 of 1, so while
    ``rate * ulp(end)`` is at most ``DONE_EPS / 4`` every wave counts as done and only the
    host's limit and the next timer (``stop``) cut the run: the ends before them, found
    by bisection. Past that bound the checks run one by one (``_equal_waves_loop``)."""
    if waves < ACCUMULATE_WAVES:
        return _equal_waves_loop(sim, task, t, d, rate, waves, limit, stop)
    cores = sim.cores
    n = cores.cohorts[0].n
    end = stop if stop < limit else limit
    while waves > 0:
        k = waves if waves < CHUNK else CHUNK
        if end < INF:   # only the ends that fit before the limit or next timer, and two more (the next piece goes on)
            k = max(1, min(k, int((end - t) / d) + 2))
        ts = list(accumulate(repeat(d, k), initial=t))   # ts[i] = ts[i - 1] + d, in order
        if rate * ulp(ts[-1]) > DONE_EPS / 4:
            return _equal_waves_loop(sim, task, t, d, rate, waves, limit, stop)
        j = min(bisect_left(ts, stop, 1), bisect_right(ts, limit, 1)) - 1   # ends < stop and <= limit
        if j:
            t = ts[j]
            if t > sim.now:
                sim.now = t
            cores.t = t
            task.blocks_left -= j * n
            cores.next_t = t + d
        if j < k:
            break
        waves -= k
    return t + d


def _equal_waves_loop(sim: Any, task: Any, t: float, d: float, rate: float, waves: int,
                      limit: float, stop: float) -> float:
    """``_equal_waves`` one wave at a time, each checked as the plain step checks it
    (cheaper than the list for a few waves)."""
    j = 0
    while j < waves:
        end = t + d
        dt = end - t
        rest = 1.0 - rate * dt if dt > 0 else 1.0
        if not ((rest <= DONE_EPS or end + rest / rate <= end) and end < stop and end <= limit):
            break
        t = end
        j += 1
    if j:
        cores = sim.cores
        if t > sim.now:
            sim.now = t
        cores.t = t
        task.blocks_left -= j * cores.cohorts[0].n
        cores.next_t = t + d
    return t + d


def run_shared_waves(sim: Any, t: float, limit: float, stop: float) -> bool:
    """The wave ends of a kernel that shares the device with other cohorts: while exactly
    one cohort ends at a time, its kernel is first in line for that pool and takes back
    as many cores as it frees, the step reduces to progress, the same cohort again at the
    end of the list (where the plain step's new cohort goes) and ``retime``; done here
    with no placement, no logs (no busy count changes) and no step around it."""
    cores, active = sim.cores, sim._active
    cohorts, free = cores.cohorts, cores.free
    if sim._dirty or not active:
        return False
    moved = False
    known: dict[Any, bool] = {}   # per cohort: first in line for its pool
    ties: dict[Any, bool] = {}   # per cohort: its demand ties another's
    while True:
        dt = t - cores.t
        w = None
        for c in cohorts:   # which cohorts ``CorePools.pop_done`` would pop at ``t``
            rest = c.left - c.rate * dt if dt > 0 else c.left
            if rest <= DONE_EPS or t + rest / c.rate <= t:
                if w is not None:
                    return moved
                w = c
        if w is None:
            return moved
        first = known.get(w)
        if first is None:   # it does not change while only wave ends happen here
            first = known[w] = _first_in_line(sim, w, free)
        if not first or not _same_count(w, free):
            return moved
        if dt > 0:   # ``CorePools.advance``
            for c in cohorts:
                c.left -= c.rate * dt
            cores.t = t
        if t > sim.now:
            sim.now = t
        if cohorts[-1] is not w:
            cohorts.remove(w)
            cohorts.append(w)
        rate = w.rate
        w.left, w.rate = 1.0, 1.0 / w.time   # as a new Cohort starts
        task = w.task
        task.blocks_left -= w.n
        tied = ties.get(w)
        if tied is None:   # nor does this
            tied = ties[w] = _tied(w, cohorts)
        if tied:
            cores.retime()
        else:   # ``retime`` sorts the same cohorts by demand into the same order: the same rates
            w.rate = rate
            cores.stale = False
            m = INF   # ``first_end``, unrolled
            for c in cohorts:
                x = c.left / c.rate
                if x < m:
                    m = x
            cores.next_t = cores.t + m
        moved = True
        if task.blocks_left == 0:
            active.remove(task)
            return True
        t = cores.next_t
        if not (t < stop and t <= limit):
            return True


def _tied(w: Any, cohorts: list[Any]) -> bool:
    """Whether another cohort that shares HBM has ``w``'s demand: moving ``w`` to the end
    of the list then changes their order in ``retime``'s stable sort (and so the shares'
    rounding). Otherwise the water-filling sees the same cohorts in the same order."""
    if w.bytes <= 0:
        return False
    demand = w.demand
    for c in cohorts:
        if c is not w and c.bytes > 0 and c.demand == demand:
            return True
    return False


def _first_in_line(sim: Any, w: Any, free: dict[str, int]) -> bool:
    """Whether the plain fill after ``w`` ends would come to its kernel first among those
    waiting for its pool, and leave none of them a core once it took its own back."""
    task, pool = w.task, w.pool
    behind = False
    for u in sim._active:   # in urgency order: no one of this pool may come first
        if u is task:
            behind = True
        elif u.pool == pool:
            if not behind:
                return False
            if free[pool] > 0:   # after it takes its n_old back, the rest would go to u
                return False
    return behind


def _same_count(w: Any, free: dict[str, int]) -> bool:
    """Whether that fill would give ``w``'s kernel exactly the ``w.n`` cores it frees."""
    task, n_old = w.task, w.n
    left = task.blocks_left
    if left <= 0:
        return False
    avail = free[w.pool] + n_old
    n = left if left < avail else avail
    limits = task.stream.core_limit
    if limits is not None and task.unit in limits:
        n = min(n, limits[task.unit] - (task.blocks_running - n_old))
    return n == n_old
