"""The links between cards as shared channels: concurrent transfers split their bandwidth.

A transfer is a flow of bytes over one or more channels (a directed HCCS link, a PCIe
path between switches, a card's host link). A channel's bandwidth is shared equally by
the flows on it, and a flow moves at the rate of its most crowded channel (assumption:
equal shares, the first-order behaviour of the links' arbiters; max-min fairness would
give a flow limited elsewhere's leftover to the others). Whenever a flow starts or ends,
every flow sharing a channel with it is brought up to date and its end re-timed; a
stale end timer knows itself by its version. The link latency is paid once, at the end.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

EPS_BYTES = 1e-6   # a flow with less left than this is done (floating-point dust)


@dataclass(eq=False)
class Flow:
    """One transfer in flight."""

    channels: tuple[str, ...]
    left: float                     # bytes still to move
    latency_us: float
    sim: Any                        # the simulator whose clock times its end
    done: Callable[[float], None]   # called with the time the last byte lands
    rate: float = 0.0               # bytes per microsecond now
    t: float = 0.0                  # when ``left`` was last brought up to date
    version: int = 0
    nbytes: float = 0.0
    seq: int = 0                    # start order: flows are re-timed in it (deterministic timers)


@dataclass
class Fabric:
    """Every channel's bandwidth (bytes/us) and the flows on it."""

    bandwidth: Callable[[str], float]
    active: dict[str, list[Flow]] = field(default_factory=dict)
    moved: dict[str, float] = field(default_factory=dict)   # bytes per channel, for stats
    _count: int = 0

    def start(self, sim: Any, channels: tuple[str, ...], nbytes: float, latency_us: float,
              done: Callable[[float], None]) -> Flow:
        """Begin moving ``nbytes`` over ``channels`` at ``sim``'s clock."""
        now = sim.now
        self._count += 1
        flow = Flow(channels, float(nbytes), latency_us, sim, done, t=now, nbytes=float(nbytes), seq=self._count)
        if flow.left <= EPS_BYTES or not channels:
            sim.at(now + latency_us, lambda _: done(now + latency_us), None)
            return flow
        affected = self._settle(channels, now)
        for c in channels:
            self.active.setdefault(c, []).append(flow)
            self.moved[c] = self.moved.get(c, 0.0) + flow.left
        self._retime([*affected, flow], now)
        return flow

    def _settle(self, channels: tuple[str, ...], now: float) -> list[Flow]:
        """Bring every flow on ``channels`` up to ``now``; return them in start order."""
        flows = sorted({f.seq: f for c in channels for f in self.active.get(c, ())}.values(), key=lambda f: f.seq)
        for f in flows:
            f.left = max(0.0, f.left - f.rate * (now - f.t))
            f.t = now
        return flows

    def _retime(self, flows: list[Flow], now: float) -> None:
        for f in flows:
            f.rate = min(self.bandwidth(c) / len(self.active[c]) for c in f.channels)
            f.version += 1
            f.sim.at(now + f.left / f.rate, self._arrive, (f, f.version))

    def _arrive(self, arg: tuple[Flow, int]) -> None:
        flow, version = arg
        if version != flow.version:   # re-timed since: a newer timer stands
            return
        now = flow.sim.now
        affected = self._settle(flow.channels, now)
        for c in flow.channels:
            self.active[c].remove(flow)
        self._retime([f for f in affected if f is not flow], now)
        flow.sim.at(now + flow.latency_us, lambda _: flow.done(now + flow.latency_us), None)
