"""Device state over time (busy cores, queued tasks), rebuilt from the simulator's logs.

Sampling at every simulator step would cost more than the step itself; the core pools
log each placement and release instead, and tasks carry their enqueue and end times,
so the step function is put together only when someone asks for it.
"""

from __future__ import annotations

from typing import Any, NamedTuple


class Sample(NamedTuple):
    """Device state from time ``t`` on: busy cores per unit and tasks enqueued, not finished."""

    t: float
    cube: int
    vector: int
    aicpu: int
    queued: int


def _changes(sim: Any) -> list[tuple[float, int, str, int]]:
    """(time, order, pool or "", delta); at one time cores change, then arrivals, then ends."""
    out = [(t, 0, pool, d) for t, pool, d in sim.cores.log]
    out += [(t.enqueue_t, 1, "", 1) for t in sim.finished]
    out += [(t.end_t, 2, "", -1) for t in sim.finished]
    for s in sim.streams:
        live = ([s.active] if s.active is not None else []) + list(s.queue)
        out += [(t.enqueue_t, 1, "", 1) for t in live if t.enqueue_t <= sim.now]
    return out


def build_samples(sim: Any) -> list[Sample]:
    """One Sample per moment the state changed, in time order."""
    busy = dict.fromkeys(sim.cores.total, 0)
    cube, vector = sim.pool_of("cube"), sim.pool_of("vector")
    queued = 0
    out: list[Sample] = []
    for t, _, pool, d in sorted(_changes(sim), key=lambda c: c[:2]):
        if pool:
            busy[pool] += d
        else:
            queued += d
        sample = Sample(t, busy[cube], busy[vector], busy["aicpu"], queued)
        if out and out[-1].t == t:
            out.pop()
        if not out or out[-1][1:] != sample[1:]:
            out.append(sample)
    return out
