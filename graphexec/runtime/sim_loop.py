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

from heapq import heappop, heappush
from typing import Any, Callable

from graphexec.runtime.core_pools import DONE_EPS, INF, MIN_BLOCK_US, Cohort
from graphexec.runtime.kernel_time import task_time

FAST_LOOP = True   # False: every step is ``Simulator._step``
LONE = True        # False: a lone kernel's wake, start and placement are ``Simulator._step``'s (``_lone``)
SKIP, GO_ON, DONE = object(), object(), object()   # what ``_lone`` did


def drive(sim: Any, limit: float, cond: Callable[[], bool] | None) -> bool:
    """Step ``sim`` until ``cond()`` holds (True) or its next event is past ``limit`` (False)."""
    step = sim._step
    if not (FAST_LOOP and sim._fast):   # off: the plain steps
        while cond is None or not cond():
            if not step(limit):
                return False
        return True
    cores, timers, ready, dirty, active = sim.cores, sim._timers, sim._ready, sim._dirty, sim._active
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
            _end(sim, t)
            continue
        t = t_timer
        if t > limit or t == INF:
            return False
        if (cohorts or active or dirty or not ready or ready[0][0] > t or (timers and timers[0][0] <= t)
                or (len(ready) > 1 and ready[1][0] <= t)):
            if not ready and not (cohorts or active or dirty) and LONE:   # a stream's wake on an idle device
                took = _lone(sim, t, limit, cond)
                if took is DONE:
                    return True
                if took is GO_ON:
                    continue
            step(limit)
            continue
        if t > sim.now:   # the one thing due: a kernel's blocks, on an idle device
            sim.now = t
        task = ready.popleft()[2]
        if cores.place_alone(task, t):
            active.append(task)
    return True


def _end(sim: Any, t: float) -> None:
    """A lone kernel's last cohort ends at ``t`` (``_step``'s ``pop_done`` of it, unrolled),
    then what its end lets start."""
    cores = sim.cores
    c = cores.cohorts[0]
    if t > sim.now:
        sim.now = t
    dt = t - cores.t
    if dt > 0:
        c.left -= c.rate * dt
        cores.t = t
    if c.left <= DONE_EPS or t + c.left / c.rate <= t:
        cores.cohorts = []
        pool, n = c.pool, c.n
        cores.free[pool] += n
        cores.log.append((t, pool, -n))
        cores.stale = True
        task = c.task   # ``_blocks_done``
        task.blocks_running -= n
        if task.blocks_left == 0 and task.blocks_running == 0:
            sim._finish(task)
        cores.spares.append(c)   # no one holds it now: a placement reuses it
    _settle_after(sim, t)


def _settle_after(sim: Any, t: float) -> None:
    """What an end at ``t`` lets start: what fell due first, else the one stream it woke."""
    timers, ready, dirty = sim._timers, sim._ready, sim._dirty
    if (timers and timers[0][0] <= t) or (ready and ready[0][0] <= t):   # an end's doing
        sim._due(t)
        sim._settle()
    elif len(dirty) == 1 and not sim._active:
        _settle_one(sim, dirty.pop())
    else:
        sim._settle()


def _settle_one(sim: Any, s: Any) -> None:
    """``Simulator._settle`` with one stream to look at, ``s``, and no kernel waiting for cores."""
    queue = s.queue
    if s.active is None and queue:
        head = queue[0]
        now = sim.now
        if head.enqueue_t > now:   # ``_run_stream``'s wait for its launch, unrolled
            heappush(sim._timers, (head.enqueue_t, next(sim._seq), sim._wake, s))
        elif head.kind != "kernel" or head.driver is not None:
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



def _lone(sim: Any, t: float, limit: float, cond: Callable[[], bool] | None) -> object:
    """A stream's wake-up due at ``t`` on an idle device (no cohort, ready or waiting kernel,
    no stream to look at) whose head is a kernel, the one timer due then: eager mode's
    every op, a launch the device finishes before the next one comes. ``_step`` wakes the
    stream, starts the kernel (``_run_stream``, ``_queue_blocks``), and a second step puts
    its blocks on the idle cores when they are ready; here both, with the same
    assignments and floats in the same order, the same ``seq`` drawn and the condition
    checked between them, then its end as the loop ends a lone kernel (``_end``). SKIP:
    not that case, nothing done; GO_ON: the loop goes on from here; DONE: ``cond`` held
    while its blocks ran, ``drive`` returns True."""
    timers = sim._timers
    _, _, fn, s = timers[0]
    if fn is not sim._wake:
        return SKIP
    queue = s.queue
    if s.active is not None or not queue:
        return SKIP
    head = queue[0]
    n = len(timers)
    if (head.kind != "kernel" or head.driver is not None or head.enqueue_t > t
            or (n > 1 and (timers[1][0] <= t or (n > 2 and timers[2][0] <= t)))):
        return SKIP   # not a kernel to start, or another timer due at the same time
    if t > sim.now:
        sim.now = t
    heappop(timers)
    now = sim.now
    try:   # ``_run_stream``'s start of a kernel, unrolled (as in ``_settle_one``)
        head.start_t = now
        if head.start_fn is not None:
            head.result = head.start_fn()
        head.pool, (head.blocks_left, head.block_us, head.block_bytes) = _cost(sim, head)
        head.ready_t = ready_t = now + sim._overhead
        s.active = head
        entry = (ready_t, next(sim._seq), head)   # its place in the ready FIFO, put there if it waits
    except BaseException:
        queue.popleft()
        sim._drop(head)
        raise
    queue.popleft()
    cores, dirty, active, ready = sim.cores, sim._dirty, sim._active, sim._ready
    if dirty or active or cores.cohorts:   # its start did more: ``_settle`` as the step ends
        ready.append(entry)
        sim._settle()
        return GO_ON
    if cores.stale:   # ``_settle``'s ``retime`` with nothing running
        cores.stale, cores.next_t = False, cores.t + INF
    if (ready or cores.next_t != INF or (timers and timers[0][0] <= ready_t) or ready_t > limit
            or (cond is not None and cond())):   # something else first or with it, a stop, or cond holds
        ready.append(entry)
        return GO_ON   # the loop checks cond, as after the plain step, and goes on from the FIFO
    if ready_t > sim.now:   # the loop's lone placement
        sim.now = ready_t
    pool, n = head.pool, head.blocks_left
    if s.core_limit is not None or not 0 < n <= cores.free[pool]:   # a cap, waves or no core: ``place_alone``
        if cores.place_alone(head, ready_t):
            active.append(head)
        return GO_ON
    return _run_alone(sim, head, pool, n, ready_t, limit, cond)


def _cost(sim: Any, task: Any) -> tuple[str, tuple[int, float, float]]:
    """``_queue_blocks``' pool and ``task_time`` of ``task``, remembered per meta object in the
    simulator's ``_times`` (an eager op's tasks share their plan's meta and cost fields),
    the entry checked against the task's fields and meta, so a changed field is looked up."""
    meta, unit, dtype, flops, nbytes, dim = task.meta, task.unit, task.dtype, task.flops, task.bytes, task.block_dim
    memo = sim._times
    hit = memo.get(id(meta))
    if (hit is not None and hit[0] is meta and hit[1] == unit and hit[2] == dtype and hit[3] == flops
            and hit[4] == nbytes and hit[5] == dim):
        return hit[6]   # type: ignore[no-any-return]
    made = ((sim._kinds.get((unit, dtype)) or sim._kind(unit, dtype))[0], task_time(memo, sim.profile, task))
    memo[id(meta)] = (meta, unit, dtype, flops, nbytes, dim, made)
    return made


def _run_alone(sim: Any, task: Any, pool: str, n: int, at: float, limit: float,
               cond: Callable[[], bool] | None) -> object:
    """``place_alone`` of all ``n`` blocks of ``task`` on idle cores at ``at``, then, unless
    ``cond`` holds then or something comes first, the loop's end of its cohort (``_end``),
    in local floats: the cohort is made only where the run stops while it runs."""
    cores = sim.cores
    if at > cores.t:
        cores.t = at
    cores.free[pool] -= n
    cores.log.append((at, pool, n))
    block_us, nbytes = task.block_us, task.block_bytes
    time = MIN_BLOCK_US if MIN_BLOCK_US > block_us else block_us
    task.blocks_left = 0
    task.blocks_running = running = task.blocks_running + n
    if running > task.max_cores:
        task.max_cores = running
    cores.stale = False   # ``retime`` of one cohort
    if nbytes > 0:   # ``solo_rate``
        r, share = 1.0 / time, cores.bw / (n * nbytes)
        rate = share if share < r else r
    else:
        rate = 1.0 / time
    cores.next_t = t = cores.t + 1.0 / rate
    timers = sim._timers
    held = cond is not None and cond()
    if held or (timers and timers[0][0] <= t) or t > limit:   # it stops, or goes on, while the blocks run
        _cohort(cores, task, pool, n, time, nbytes, rate, 1.0)
        return DONE if held else GO_ON
    if t > sim.now:   # ``_end``, its cohort in locals
        sim.now = t
    left, dt = 1.0, t - cores.t
    if dt > 0:
        left -= rate * dt
        cores.t = t
    if not (left <= DONE_EPS or t + left / rate <= t):
        _cohort(cores, task, pool, n, time, nbytes, rate, left)
        sim._settle()
        return GO_ON
    cores.free[pool] += n
    cores.log.append((t, pool, -n))
    cores.stale = True
    task.blocks_running -= n
    if task.blocks_running == 0:
        sim._finish(task)
    _settle_after(sim, t)
    return GO_ON


def _cohort(cores: Any, task: Any, pool: str, n: int, time: float, nbytes: float, rate: float, left: float) -> None:
    """The running cohort ``_run_alone`` kept in locals, as ``place_alone`` makes it."""
    c = cores.spares.pop() if cores.spares else Cohort(task, pool, n, time, nbytes)
    c.task, c.pool, c.n, c.left, c.time, c.bytes = task, pool, n, left, time, nbytes
    c.demand, c.rate = nbytes / time, rate
    cores.cohorts.append(c)
