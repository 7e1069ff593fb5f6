"""The event loop of one device's simulator, with its two commonest steps written out.

``Simulator.run_until`` and ``advance_to`` step until the host's condition holds or no
event is due by its clock. Most steps of a real schedule are one of two kinds, as kernels
of a few blocks take less than the task overhead: a kernel's blocks come due on an idle
device and go onto it alone, and a lone kernel's cohort ends and its stream's next
kernel starts (its blocks then wait out the overhead in the ready FIFO). Each costs a
whole ``Simulator._step`` (and the calls below it) the plain way; here the two are done
in the loop itself, with the same checks first, the same assignments and float
operations in the same order, the same ``seq`` drawn and the same core log, and the
condition checked after every step as before. Anything else, or anything less certain
(several cohorts, waves, a timer due, a stream woken, a record or wait at a stream's
head), is ``Simulator._step``'s, unchanged. ``tests/unit/runtime/test_sim_loop.py``
compares the two with the plain simulator bit for bit.
"""

from __future__ import annotations

from typing import Any, Callable

from graphexec.runtime.core_pools import DONE_EPS, INF
from graphexec.runtime.kernel_time import task_time

FAST_LOOP = True   # False: every step is ``Simulator._step``


def drive(sim: Any, limit: float, cond: Callable[[], bool] | None) -> bool:
    """Step ``sim`` until ``cond()`` holds (True) or its next event is past ``limit`` (False)."""
    step = sim._step
    if not (FAST_LOOP and sim._fast):   # off: the plain steps
        while cond is None or not cond():
            if not step(limit):
                return False
        return True
    cores, timers, ready, dirty, active = sim.cores, sim._timers, sim._ready, sim._dirty, sim._active
    free, log, spares = cores.free, cores.log, cores.spares
    while cond is None or not cond():
        t_timer = timers[0][0] if timers else INF
        if ready and ready[0][0] < t_timer:
            t_timer = ready[0][0]
        t = cores.next_t
        cohorts = cores.cohorts
        if t < t_timer:   # blocks end, no timer is due
            if t > limit:
                return False
            if len(cohorts) != 1 or cohorts[0].task.blocks_left > 0:   # shared, or waves to go
                step(limit)
                continue
            c = cohorts[0]   # a lone kernel's last cohort: ``_step``'s ``pop_done`` of it, unrolled
            if t > sim.now:
                sim.now = t
            dt = t - cores.t
            if dt > 0:
                c.left -= c.rate * dt
                cores.t = t
            if c.left <= DONE_EPS or t + c.left / c.rate <= t:
                cores.cohorts = []
                pool, n = c.pool, c.n
                free[pool] += n
                log.append((t, pool, -n))
                cores.stale = True
                task = c.task   # ``_blocks_done``
                task.blocks_running -= n
                if task.blocks_left == 0 and task.blocks_running == 0:
                    sim._finish(task)
                spares.append(c)   # no one holds it now: a placement reuses it
            if (timers and timers[0][0] <= t) or (ready and ready[0][0] <= t):   # an end's doing
                sim._due(t)
                sim._settle()
            elif len(dirty) == 1 and not active:
                _settle_one(sim, dirty.pop())
            else:
                sim._settle()
            continue
        t = t_timer
        if t > limit or t == INF:
            return False
        if (cohorts or active or dirty or not ready or ready[0][0] > t or (timers and timers[0][0] <= t)
                or (len(ready) > 1 and ready[1][0] <= t)):
            step(limit)
            continue
        if t > sim.now:   # the one thing due: a kernel's blocks, on an idle device
            sim.now = t
        task = ready.popleft()[2]
        if cores.place_alone(task, t):
            active.append(task)
    return True


def _settle_one(sim: Any, s: Any) -> None:
    """``Simulator._settle`` with one stream to look at, ``s``, and no kernel waiting for cores."""
    queue = s.queue
    if s.active is None and queue:
        head = queue[0]
        now = sim.now
        if head.kind != "kernel" or head.driver is not None or head.enqueue_t > now:
            sim._run_stream(s)
        else:
            try:   # ``_run_stream``'s start of a kernel, unrolled
                head.start_t = now
                if head.start_fn is not None:
                    head.result = head.start_fn()
                unit, dtype = head.unit, head.dtype   # ``_queue_blocks``, unrolled
                head.pool = (sim._kinds.get((unit, dtype)) or sim._kind(unit, dtype))[0]
                head.blocks_left, head.block_us, head.block_bytes = task_time(sim._times, sim.profile, head)
                head.ready_t = ready = now + sim._overhead
                s.active = head
                sim._ready.append((ready, next(sim._seq), head))
            except BaseException:   # as ``_run_stream``: its start raised, it ends here
                queue.popleft()
                sim._drop(head)
                raise
            queue.popleft()
    cores = sim.cores
    if sim._dirty or sim._active or cores.cohorts:
        sim._settle()
    elif cores.stale:   # ``retime`` with nothing running
        cores.stale, cores.next_t = False, cores.t + INF

