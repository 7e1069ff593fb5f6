"""The process-wide state behind ``graphexec.acl``: devices, contexts, handles.

ACL keeps global state (initialized or not, which devices are open and how often,
each thread's current context); this module holds it in one place, checks every
handle a caller passes, and tears a device down completely when its count reaches 0.
It is public within the package: HCCL runs on the devices and server ACL opened (as
the real HCCL runs in the runtime's current context), and profiling from the
environment watches devices being torn down (``TEARDOWN_HOOKS``).
"""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, TypeVar

import numpy as np

from graphexec.errors import AclError
from graphexec.runtime import codes
from graphexec.runtime.argcheck import checking
from graphexec.runtime.codes import acl_error, invalid_handle, invalid_param
from graphexec.runtime.device import Device
from graphexec.runtime.memory import BASE_ADDRESS, DEVICE_STRIDE
from graphexec.runtime.server import Server
from graphexec.runtime.stream import Event, Stream

F = TypeVar("F", bound=Callable[..., Any])
# called with a device's Device before it is torn down (profiling/env.py keeps what it ran)
TEARDOWN_HOOKS: list[Callable[[Device], None]] = []


@dataclass(eq=False)
class Context:
    """An ACL context: bound to one device, with its own default stream."""

    id: int
    device_id: int
    default_stream: Stream
    is_default: bool
    streams: list[Stream] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    destroyed: bool = False

    def __repr__(self) -> str:
        return f"Context({self.id}, device={self.device_id})"


@dataclass(eq=False)
class DeviceEntry:
    """An open device: the emulated hardware, its set_device count and its contexts."""

    device: Device
    refcount: int = 0
    default_ctx: Context | None = None
    contexts: list[Context] = field(default_factory=list)
    errors: list[tuple[str, BaseException]] = field(default_factory=list)   # kernel faults, raised at sync


class State:
    """Everything aclInit sets up and aclFinalize clears."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.initialized = False
        self.profile: Any = "ascend910"
        self.device_count = 1
        self.check_hazards = False
        self.devices: dict[int, DeviceEntry] = {}
        self.server: Server | None = None      # acl.init(system=...): the cards share a clock and links
        self.pinned: dict[int, np.ndarray] = {}
        self.local = threading.local()
        self._ctx_ids = 0

    # ---- devices and contexts ------------------------------------------------------
    def require_init(self) -> None:
        if not self.initialized:
            raise acl_error(codes.UNINITIALIZE, "call acl.init() first")

    def check_device_id(self, device_id: Any) -> int:
        if isinstance(device_id, bool) or not isinstance(device_id, (int, np.integer)) \
                or not 0 <= device_id < self.device_count:
            raise acl_error(codes.RT_INVALID_DEVICEID,
                            f"device {device_id!r} does not exist; there are {self.device_count}")
        return int(device_id)

    def open_device(self, device_id: int) -> DeviceEntry:
        entry = self.devices.get(device_id)
        if entry is None:
            dev = (self.server.device(device_id) if self.server is not None
                   else Device(self.profile, device_id, check_hazards=self.check_hazards))
            entry = self.devices[device_id] = DeviceEntry(dev)
            entry.default_ctx = self.new_context(entry, device_id, dev.default_stream, True)
        return entry

    def new_context(self, entry: DeviceEntry, device_id: int, stream: Stream, is_default: bool) -> Context:
        ctx = Context(self._ctx_ids, device_id, stream, is_default)
        self._ctx_ids += 1
        stream.context = ctx
        entry.contexts.append(ctx)
        return ctx

    def teardown(self, device_id: int) -> None:
        """Wait for the device, then release every context, stream, event and byte of it."""
        entry = self.devices.pop(device_id)
        try:
            entry.device.synchronize_device()
        except AclError as err:   # work that can never finish: resetting the device drops it
            if err.code != codes.RT_STREAM_SYNC_TIMEOUT:
                raise
        finally:
            for hook in TEARDOWN_HOOKS:
                hook(entry.device)
            for ctx in entry.contexts:
                ctx.destroyed = True
                for s in [ctx.default_stream, *ctx.streams]:
                    s.destroyed = True
                for e in ctx.events:
                    e.destroyed = True
            entry.device.memory.free_all()
            if self.server is not None:
                self.server.forget(device_id)
            if getattr(self.local, "ctx", None) is not None and self.local.ctx.device_id == device_id:
                self.local.ctx = None

    # ---- handles -------------------------------------------------------------------
    def context(self) -> Context:
        """The calling thread's current context."""
        self.require_init()
        ctx = getattr(self.local, "ctx", None)
        if ctx is None or ctx.destroyed:
            raise acl_error(codes.RT_CONTEXT_NULL, "this thread has no current context; "
                            "call acl.set_device() or acl.create_context() first")
        return ctx

    def require_server(self) -> Server:
        """The server of acl.init(system=...); devices made by device_count share no links."""
        if self.server is None:
            raise acl_error(codes.RT_FEATURE_NOT_SUPPORT, "the devices of acl.init(device_count=N) share no "
                            "links; name a system: acl.init(system='atlas800-910')")
        return self.server

    def entry_of(self, device_id: int) -> DeviceEntry:
        entry = self.devices.get(device_id)
        if entry is None:
            raise acl_error(codes.RT_INVALID_DEVICEID, f"device {device_id} is not open")
        return entry

    def stream(self, stream: Stream | None) -> tuple[Device, Stream]:
        """The device and stream a call targets; ``None`` is the current default stream."""
        ctx = self.context()
        if stream is None:
            return self.entry_of(ctx.device_id).device, ctx.default_stream
        live(stream, Stream, "a stream")
        if stream.context.device_id != ctx.device_id:
            raise acl_error(codes.RT_STREAM_CONTEXT, f"stream {stream.id} belongs to device "
                            f"{stream.context.device_id}, the current context to device {ctx.device_id}")
        return self.entry_of(ctx.device_id).device, stream

    def event(self, event: Event) -> Event:
        self.require_init()
        return live(event, Event, "an event")

    def device_of_ptr(self, ptr: Any) -> Device:
        """The open device whose address range holds device pointer ``ptr``."""
        self.require_init()
        if isinstance(ptr, bool) or not isinstance(ptr, (int, np.integer)) or ptr <= 0:
            raise invalid_param(f"{ptr!r} is not a device pointer")
        entry = self.devices.get((int(ptr) - BASE_ADDRESS) // DEVICE_STRIDE)
        if entry is None:
            raise invalid_handle(f"{int(ptr):#x} is not memory of an open device")
        return entry.device

    def raise_faults(self, device: Device) -> None:
        """Kernel failures surface at the next synchronizing call, as on hardware."""
        entry = self.devices.get(device.id)
        if entry is not None and entry.errors:
            name, exc = entry.errors[0]
            entry.errors.clear()
            raise acl_error(codes.RT_AICORE_EXCEPTION, f"kernel {name!r} failed: {exc}") from exc

    def fault(self, device: Device, name: str, exc: BaseException) -> None:
        entry = self.devices.get(device.id)
        if entry is not None:
            entry.errors.append((name, exc))

    # ---- host memory -----------------------------------------------------------------
    def is_pinned(self, arr: np.ndarray) -> bool:
        base: Any = arr
        while base is not None:
            if self.pinned.get(id(base)) is base:
                return True
            base = getattr(base, "base", None)
        return False


STATE = State()


def api(fn: F) -> F:
    """Check an ACL entry's arguments against its annotations (``runtime/argcheck.py``), then serialize
    the call: the emulated runtime is shared by every host thread (HCCL's entries too, which
    check their own arguments)."""
    body = checked(fn) if fn.__module__.startswith("graphexec.acl") else fn

    @functools.wraps(fn)
    def locked(*args: Any, **kwargs: Any) -> Any:
        with STATE.lock:
            return body(*args, **kwargs)

    return locked  # type: ignore[return-value]


def checked(fn: F) -> F:
    """``fn`` with its arguments checked against its annotations (``runtime/argcheck.py``), no lock."""
    return checking(fn, f"acl.{fn.__name__}")  # type: ignore[return-value]


def live(handle: Any, cls: type[Any], kind: str) -> Any:
    """``handle`` when it is a ``cls`` not yet destroyed (``kind``: "a stream"), else ACL's
    invalid-parameter or invalid-handle error."""
    if not isinstance(handle, cls):
        raise invalid_param(f"{handle!r} is not {kind}")
    if handle.destroyed:
        raise invalid_handle(f"{kind.split()[-1]} {handle.id} was destroyed")
    return handle
