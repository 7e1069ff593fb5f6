"""A server's simulators on one clock: stepped in one global time order (``sim.py`` holds
one device's simulator; ``SimGroup`` is also importable from there)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from graphexec.runtime.core_pools import INF

if TYPE_CHECKING:
    from graphexec.runtime.sim import Simulator


class SimGroup:
    """The simulators of a server's devices, stepped in one global time order: always the
    device whose next event is earliest, so whatever one device does to another (a copy
    over a link, a collective's end, an event) lands at or after that device's clock."""

    def __init__(self) -> None:
        self.sims: list[Simulator] = []
        self.now = 0.0

    def _step(self, limit: float) -> bool:
        sims = self.sims
        if not sims:
            return False
        times = [s.next_t() for s in sims]
        k = times.index(min(times))   # the first of the earliest, as min() picks
        horizon = min(times[:k] + times[k + 1:], default=INF)   # how far it may run alone
        sim = sims[k]
        if not sim._step(limit, horizon):
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
