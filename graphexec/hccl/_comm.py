"""Communicators, and how one collective gathers its ranks' parts before it runs.

``comm_init_all`` makes one comm per rank over devices of the server of
``acl.init(system=...)``. Each rank's call of a collective enqueues a task on its own
stream; the k-th collective call of every rank forms the k-th collective (the k-th send
from a to b pairs with the k-th recv at b from a), and it starts once every part has
reached the head of its stream, so it runs when the slowest rank gets there, as on
hardware, where the ranks' first handshake waits for each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from graphexec.acl.state import STATE, api
from graphexec.errors import AclError
from graphexec.hccl import _algo
from graphexec.hccl._types import HCCL_E_NOT_SUPPORT, HCCL_E_PARA, HCCL_E_PTR, HCCL_E_RUNTIME, hccl_error, is_int
from graphexec.runtime.device import Device
from graphexec.runtime.server import Server
from graphexec.runtime.sim import DeviceTask
from graphexec.runtime.stream import Stream


@dataclass(eq=False)
class CommGroup:
    """What the comms of one comm_init_all share: devices, algorithm, open collectives."""

    server: Server
    devices: tuple[int, ...]
    algorithm: str                                   # for collectives: "mesh", "ring" or "local"
    open: dict[tuple, Op] = field(default_factory=dict)   # collectives still missing a rank's call


@dataclass(eq=False)
class Comm:
    """HcclComm: one rank's handle."""

    rank: int
    group: CommGroup
    destroyed: bool = False
    calls: int = 0                                   # collective calls made so far
    sent: dict[int, int] = field(default_factory=dict)    # peer rank -> sends made to it
    received: dict[int, int] = field(default_factory=dict)

    @property
    def device(self) -> int:
        return self.group.devices[self.rank]

    def __repr__(self) -> str:
        return f"HcclComm(rank {self.rank} of {len(self.group.devices)}, device {self.device})"


@dataclass(eq=False)
class Part:
    """One rank's share of a collective: its task, device and what it lands at the end."""

    op: Op
    rank: int
    device: Device
    task: DeviceTask
    sim: Any = None
    out: Callable[[], None] | None = None            # set at the start: the end's writes

    def begin(self, task: DeviceTask, sim: Any) -> None:
        """The simulator's driver hook: this part reached its stream's head."""
        self.sim = sim
        self.op.arrive(sim)

    def land(self, _: Any) -> None:
        if self.out is not None:
            self.out()
            self.out = None


@dataclass(eq=False)
class Op:
    """One collective (or one send/recv pair) across its ranks."""

    name: str
    signature: tuple                                 # what every rank's call must agree on
    devices: tuple[int, ...]                         # the devices of the plan's ranks
    server: Server
    plan: _algo.Plan
    compute: Callable[[dict[int, Part]], None]       # sets each part's ``out``
    needed: int
    parts: dict[int, Part] = field(default_factory=dict)
    arrived: int = 0

    def arrive(self, sim: Any) -> None:
        self.arrived += 1
        if self.arrived < self.needed:
            return
        try:   # the data is read now that every rank is there; a failure is a fault at sync
            self.compute(self.parts)
        except Exception as exc:
            for part in self.parts.values():
                STATE.fault(part.device, self.name, exc)
        server = self.server
        _algo.run(server.fabric, server.system, self.devices, self.plan, sim, self._done)

    def _done(self, t: float) -> None:
        for part in self.parts.values():
            part.sim.end_at(part.task, t)


@api
def comm_init_all(ndev: int, devices: list[int] | tuple[int, ...]) -> list[Comm]:
    """HcclCommInitAll: one comm per rank, rank r on device ``devices[r]``.

    The devices belong to the server of ``acl.init(system=...)`` and are opened (without
    a reference, like the runtime's own use of a device); collectives then pick mesh
    when every pair is joined by direct HCCS, else ring.
    """
    server = _server()
    if not is_int(ndev) or not 1 <= ndev <= server.count:
        raise hccl_error(HCCL_E_PARA, f"ndev must be an int in 1..{server.count}, got {ndev!r}")
    if not isinstance(devices, (list, tuple)) or len(devices) != ndev:
        raise hccl_error(HCCL_E_PARA, f"devices must be a list of ndev={ndev} device ids, got {devices!r}")
    ids = tuple(_device_id(d, server.count) for d in devices)
    if len(set(ids)) != len(ids):
        raise hccl_error(HCCL_E_PARA, f"devices {list(ids)} name a device twice")
    for d in ids:
        STATE.open_device(d)
    group = CommGroup(server, ids, _algo.choose(server.system, ids))
    return [Comm(r, group) for r in range(ndev)]


def _server() -> Server:
    if not STATE.initialized:
        raise hccl_error(HCCL_E_RUNTIME, "the runtime is not initialized; call acl.init(system=...) first")
    if STATE.server is None:
        raise hccl_error(HCCL_E_NOT_SUPPORT, "the devices of acl.init(device_count=N) share no links; "
                                             "name a system: acl.init(system='atlas800t-a2')")
    return STATE.server


def _device_id(d: Any, count: int) -> int:
    if not is_int(d) or not 0 <= d < count:
        raise hccl_error(HCCL_E_PARA, f"device {d!r} does not exist; the system has devices 0..{count - 1}")
    return int(d)


def live_comm(comm: Any) -> Comm:
    """``comm`` when it is a live comm of the runtime running now."""
    if not isinstance(comm, Comm):
        raise hccl_error(HCCL_E_PTR if comm is None else HCCL_E_PARA, f"{comm!r} is not an HcclComm")
    if comm.destroyed:
        raise hccl_error(HCCL_E_PARA, f"{comm!r} was destroyed")
    if not STATE.initialized or comm.group.server is not STATE.server:
        raise hccl_error(HCCL_E_PARA, f"{comm!r} belongs to a runtime that was finalized")
    return comm


@api
def comm_destroy(comm: Comm) -> None:
    """HcclCommDestroy: the handle is unusable afterwards (collectives in flight finish)."""
    live_comm(comm).destroyed = True


@api
def get_rank_size(comm: Comm) -> int:
    """HcclGetRankSize: the number of ranks of the comm."""
    return len(live_comm(comm).group.devices)


@api
def get_rank_id(comm: Comm) -> int:
    """HcclGetRankId: this handle's rank."""
    return live_comm(comm).rank


def rank_stream(comm: Comm, stream: Stream | None) -> tuple[Device, Stream]:
    """The rank's device and the stream its part goes on (None: the current default
    stream, whose context must be on the comm's device)."""
    entry = STATE.devices.get(comm.device)
    if entry is None:
        raise hccl_error(HCCL_E_PARA, f"device {comm.device} of rank {comm.rank} was reset")
    if stream is None:
        ctx = getattr(STATE.local, "ctx", None)
        if ctx is None or ctx.destroyed or ctx.device_id != comm.device:
            where = "no current context" if ctx is None or ctx.destroyed else f"device {ctx.device_id} current"
            raise hccl_error(HCCL_E_PARA, f"stream None means the current default stream, and with {where} it "
                                          f"is not on device {comm.device} of rank {comm.rank}")
        return entry.device, ctx.default_stream
    if not isinstance(stream, Stream) or stream.destroyed:
        raise hccl_error(HCCL_E_PARA, f"{stream!r} is not a live stream")
    owner = getattr(stream.context, "device_id", None)
    if owner != comm.device:
        raise hccl_error(HCCL_E_PARA, f"stream {stream.id} is on device {owner}, rank {comm.rank} on device "
                                      f"{comm.device}")
    return entry.device, stream


def buffer(dev: Device, ptr: Any, nbytes: int, what: str) -> tuple[int, int, str]:
    """The hazard range ``(ptr, nbytes, name)`` of a buffer, checked to be on ``dev``."""
    if ptr is None or (is_int(ptr) and ptr == 0):
        raise hccl_error(HCCL_E_PTR, f"{what} is a null pointer")
    if not is_int(ptr):
        raise hccl_error(HCCL_E_PARA, f"{what} must be a device pointer, got {ptr!r}")
    try:
        dev.memory.segment(int(ptr), nbytes)
    except AclError:
        raise hccl_error(HCCL_E_PARA, f"{what} {int(ptr):#x} is not {nbytes} bytes of device {dev.id}'s "
                                      "memory") from None
    return int(ptr), nbytes, f"{int(ptr):#x}"


def read(part: Part, dtype: np.dtype) -> np.ndarray:
    """The part's first read range as ``dtype`` elements (a view of its device memory)."""
    ptr, nbytes, _ = part.task.reads[0]
    return part.device.memory.bytes_at(ptr, nbytes).view(dtype)
