"""The process-wide state of eager mode: the cards, each one's allocator and current stream.

torch.npu keeps the current device, one current stream per device and one caching
allocator per device; so does this module. Cards are made on first use over the emulated
runtime (``runtime.Device``; ``init(system=...)`` puts them on one server's clock and
links). Resetting a card waits for it, frees its memory and retires its streams, so a
stream or tensor of the old card is refused with one line.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from graphexec.errors import DeviceError
from graphexec.kernels.quiet import run_quietly
from graphexec.npu._conf import alloc_rules
from graphexec.profiling import env
from graphexec.runtime.caching import CachingAllocator
from graphexec.runtime.codes import invalid_handle
from graphexec.runtime.device import Device
from graphexec.runtime.profiles import DeviceProfile, load_profile
from graphexec.runtime.server import Server
from graphexec.runtime.stream import Stream as RtStream
from graphexec.runtime.systems import SystemProfile, load_system

NORMAL, HIGH = 1, 0   # runtime priorities of torch's priority 0 (and above) and -1 (and below)


@dataclass(eq=False)
class Card:
    """One device as eager mode sees it."""

    index: int
    device: Device
    allocator: CachingAllocator
    current: RtStream
    alive: bool = True
    streams: dict[int, RtStream] = field(default_factory=dict)   # runtime id -> stream
    segments: dict[int, Any] = field(default_factory=dict)       # allocator segment base -> its bytes

    @property
    def name(self) -> str:
        return f"npu:{self.index}"

    def check(self) -> None:
        if not self.alive:
            raise invalid_handle(f"device {self.name} was reset; its streams and tensors are gone")

    def forget_segments(self) -> None:
        """Drop the bytes of segments the allocator gave back (empty_cache), so they are freed."""
        live = self.allocator.segments
        for base in [b for b in self.segments if b not in live]:
            del self.segments[base]

    def stream_by_id(self, stream_id: int, priority: int) -> RtStream:
        """The card's stream ``stream_id`` (0: the default one), made on first use."""
        while stream_id not in self.streams:
            s = self.device.create_stream(priority)
            self.streams[s.id] = s
        return self.streams[stream_id]


class State:
    """Everything ``init`` sets up; ``reset_device`` takes one card away."""

    def __init__(self) -> None:
        self.configure()

    def configure(self, device: str | DeviceProfile = "ascend910", device_count: int = 1,
                  system: str | SystemProfile | None = None, check_hazards: bool = False) -> None:
        if system is not None:
            sysprof = system if isinstance(system, SystemProfile) else load_system(system)
            self.server: Server | None = Server(sysprof, check_hazards)
            self.profile, self.count = sysprof.device_profile, sysprof.count
        else:
            if isinstance(device_count, bool) or not isinstance(device_count, int) or device_count < 1:
                raise DeviceError(f"device_count must be an int >= 1, got {device_count!r}")
            self.server, self.profile, self.count = None, load_profile(device), device_count
        self.check_hazards = check_hazards
        self.cards: dict[int, Card] = {}
        self.current_device = 0
        self.capture: Any = None          # the NPUGraph being captured, if any
        self.seed = 0

    def card(self, index: int | None = None) -> Card:
        i = self.current_device if index is None else index
        if not 0 <= i < self.count:
            raise DeviceError(f"device npu:{i} does not exist; there are {self.count} (npu:0..npu:{self.count - 1})")
        c = self.cards.get(i)
        if c is None:
            c = self.cards[i] = self._open(i)
        return c

    def _open(self, i: int) -> Card:
        dev = self.server.device(i) if self.server is not None else \
            Device(self.profile, i, check_hazards=self.check_hazards)
        dev.default_stream.priority = NORMAL
        dev.batch_waits, dev.quiet = True, run_quietly   # launches onto a full queue go in batches (Device._hold)
        env.watch(dev, "eager")   # ASCEND_PROFILING_ENABLED: keep what this card runs
        alloc = CachingAllocator(dev, alloc_rules(os.environ.get("PYTORCH_NPU_ALLOC_CONF", "")))
        return Card(i, dev, alloc, dev.default_stream, streams={dev.default_stream.id: dev.default_stream})

    def reset(self, index: int) -> None:
        """Wait for the card, then release its memory and streams (aclrtResetDevice)."""
        c = self.cards.pop(index, None)
        if c is None:
            return
        c.device.synchronize_device()
        FAULTS.pop(index, None)   # the card's failures go with it: a fresh card starts clean
        c.alive = False
        for s in c.streams.values():
            s.destroyed = True
        c.device.memory.free_all()
        if self.server is not None:
            self.server.forget(index)


STATE = State()
FAULTS: dict[int, list[tuple[str, BaseException]]] = {}   # card index -> kernel failures, raised at sync


def parse_device(device: Any) -> int | None:
    """The card index of a device argument ("npu:1", "npu", 1, a Tensor's device), or None
    for the host ("cpu")."""
    if device is None:
        return STATE.current_device
    index = getattr(device, "index", device)
    if isinstance(index, bool):
        raise DeviceError(f"{device!r} is not a device; use 'npu:N', 'cpu' or an int")
    if isinstance(index, int):
        return STATE.current_device if index < 0 else index
    if isinstance(device, str):
        kind, _, num = device.partition(":")
        if kind == "cpu" and not num:
            return None
        if kind == "npu" and (not num or num.isdigit()):
            return int(num) if num else STATE.current_device
    raise DeviceError(f"{device!r} is not a device; use 'npu:N', 'cpu' or an int")
