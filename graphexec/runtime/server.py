"""A server of cards: the devices of a system profile on one simulated clock, joined by
its links.

Every device keeps its own simulator (cores, streams, command queues); the server steps
them in one global time order (``SimGroup``) and owns the fabric, whose channels the
system profile names. A copy between two cards is a stream task on the issuing card's
copy engine that a driver times over the links it crosses: the direct link when peer
access is on, else staged through the host (down one card's host link, up the other's).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from graphexec.runtime.device import Device
from graphexec.runtime.fabric import Fabric
from graphexec.runtime.sim import DeviceTask, SimGroup
from graphexec.runtime.systems import LinkSpec, SystemProfile

Phase = tuple[tuple[str, ...], float]   # (channels, latency in us) of one leg of a transfer


def bytes_per_us(gbps: float) -> float:
    """GB/s (1e9 bytes per second) as bytes per simulated microsecond."""
    return gbps * 1e3


@dataclass(eq=False)
class Transfer:
    """A task's driver: its bytes cross the legs in turn, then the task ends."""

    fabric: Fabric
    phases: list[Phase]
    nbytes: float
    route: str                      # "HCCS", "PCIe", ... or "host" (staged), for the timeline

    def begin(self, task: DeviceTask, sim: Any) -> None:
        self._leg(task, sim, 0)

    def _leg(self, task: DeviceTask, sim: Any, i: int) -> None:
        channels, latency = self.phases[i]

        def landed(t: float) -> None:
            if i + 1 < len(self.phases):
                self._leg(task, sim, i + 1)
            else:
                sim.end_at(task, t)

        self.fabric.start(sim, channels, self.nbytes, latency, landed)


class Server:
    """The cards of ``system``; devices are made on first use and share one clock."""

    def __init__(self, system: SystemProfile, check_hazards: bool = False) -> None:
        self.system = system
        self.check_hazards = check_hazards
        self.group = SimGroup()
        self._channels: dict[str, float] = {}
        for a in range(system.count):
            self._add(system.host_link(a))
            for b in range(system.count):
                if a != b:
                    self._add(system.link(a, b))
        self.fabric = Fabric(self._channels.__getitem__)
        self.devices: dict[int, Device] = {}
        self.peers: set[tuple[int, int]] = set()   # (a, b): device a has enabled access to b

    def _add(self, link: LinkSpec) -> None:
        for channel in link.channels:
            self._channels[channel] = bytes_per_us(link.bandwidth_gbps)

    @property
    def count(self) -> int:
        return self.system.count

    def device(self, i: int) -> Device:
        dev = self.devices.get(i)
        if dev is None:
            dev = self.devices[i] = Device(self.system.device_profile, i, self.check_hazards, group=self.group)
        return dev

    def forget(self, i: int) -> None:
        """Device ``i`` was reset: its next use starts a fresh one (on the same clock)."""
        dev = self.devices.pop(i, None)
        if dev is not None:
            self.group.sims.remove(dev.sim)
        self.peers = {p for p in self.peers if i not in p}

    def route(self, issuer: int, src: int, dst: int) -> Transfer:
        """How ``src``'s bytes reach ``dst`` for a copy issued on ``issuer``'s stream."""
        other = dst if issuer == src else src
        if (issuer, other) in self.peers:
            link = self.system.link(src, dst)
            return Transfer(self.fabric, [(link.channels, link.latency_us)], 0.0, link.kind)
        up, down = self.system.host_link(src), self.system.host_link(dst)
        legs: list[Phase] = [(up.channels, up.latency_us), (down.channels, down.latency_us)]
        return Transfer(self.fabric, legs, 0.0, "host")

    def copy_task(self, stream: Any, issuer: int, src: int, dst: int, nbytes: int,
                  start_fn: Callable[[], Any], end_fn: Callable[[Any], None], reads: list, writes: list) -> DeviceTask:
        """The stream task of a copy between two cards (read at its start, written at its end)."""
        transfer = self.route(issuer, src, dst)
        transfer.nbytes = float(nbytes)
        return DeviceTask("memcpy", stream, f"memcpy d{src}->d{dst}", unit="copy", bytes=float(nbytes),
                          copy_kind=f"p2p:{transfer.route}", start_fn=start_fn, end_fn=end_fn,
                          reads=reads, writes=writes, driver=transfer,
                          meta={"link": transfer.route, "src": src, "dst": dst})
