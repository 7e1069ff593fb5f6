"""The emulated runtime driven ACL style: the aclrt* C functions as plain Python functions.

Names and argument orders follow the C API (``aclrtMemcpy(dst, destMax, src, count,
kind)`` is ``acl.memcpy(dst, dest_max, src, count, kind)``); output parameters become
return values and error codes become ``acl.AclError`` with ``.code`` and ``.name``.

Example (the runtime article's two-stream program):
    >>> from graphexec import acl
    >>> acl.init(); acl.set_device(0); ctx = acl.create_context(0)
    >>> s1, s2 = acl.create_stream(), acl.create_stream()
    >>> d_a = acl.malloc(nbytes, acl.MEM_MALLOC_HUGE_FIRST)
    >>> acl.memcpy(d_a, nbytes, h_a, nbytes, acl.MEMCPY_HOST_TO_DEVICE)
    >>> acl.launch_kernel(preprocess, 8, s1, d_a, d_b)
    >>> ev = acl.create_event(); acl.record_event(ev, s1); acl.stream_wait_event(s2, ev)
    >>> acl.launch_kernel(postprocess, 8, s2, d_b, d_c)
    >>> acl.synchronize_stream(s1); acl.synchronize_stream(s2)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from graphexec.acl._launch import Tensor, launch_callback, launch_kernel, tensor
from graphexec.acl._memory import (
    free,
    free_cached,
    free_host,
    get_mem_info,
    malloc,
    malloc_cached,
    malloc_host,
    memcpy,
    memcpy_async,
    memory_stats,
    memset,
    memset_async,
)
from graphexec.acl._peer import (
    device_can_access_peer,
    device_disable_peer_access,
    device_enable_peer_access,
    get_devices_topo,
)
from graphexec.acl.state import STATE, Context, api, live
from graphexec.errors import AclError
from graphexec.runtime import codes
from graphexec.runtime.argcheck import numpy_dtype
from graphexec.runtime.codes import (
    CALLBACK_BLOCK,
    CALLBACK_NO_BLOCK,
    DDR_MEM,
    EVENT_RECORDED_STATUS_COMPLETE,
    EVENT_RECORDED_STATUS_NOT_READY,
    HBM_MEM,
    HBM_MEM_HUGE,
    HBM_MEM_NORMAL,
    MEM_MALLOC_HUGE_FIRST,
    MEM_MALLOC_HUGE_FIRST_P2P,
    MEM_MALLOC_HUGE_ONLY,
    MEM_MALLOC_HUGE_ONLY_P2P,
    MEM_MALLOC_NORMAL_ONLY,
    MEM_MALLOC_NORMAL_ONLY_P2P,
    MEMCPY_DEFAULT,
    MEMCPY_DEVICE_TO_DEVICE,
    MEMCPY_DEVICE_TO_HOST,
    MEMCPY_HOST_TO_DEVICE,
    MEMCPY_HOST_TO_HOST,
    MEMCPY_INNER_DEVICE_TO_DEVICE,
    MEMCPY_INTER_DEVICE_TO_DEVICE,
    acl_error,
    invalid_param,
    invalid_value,
)
from graphexec.runtime.device import Device
from graphexec.runtime.hazards import Hazard
from graphexec.runtime.profiles import DeviceProfile, load_profile
from graphexec.runtime.server import Server
from graphexec.runtime.stream import Event, Stream
from graphexec.runtime.systems import (
    DEVICES_TOPO_HCCS,
    DEVICES_TOPO_HCCS_SW,
    DEVICES_TOPO_PHB,
    DEVICES_TOPO_PIX,
    DEVICES_TOPO_SIO,
    DEVICES_TOPO_SYS,
    SystemProfile,
    load_system,
)

__all__ = [
    "AclError", "Context", "Stream", "Event", "Tensor", "tensor", "init", "finalize", "get_device_count",
    "set_device", "reset_device", "get_device", "create_context", "destroy_context", "set_current_context",
    "get_current_context", "create_stream", "destroy_stream", "create_event", "destroy_event", "record_event",
    "stream_wait_event", "reset_event", "query_event", "synchronize_event", "event_elapsed_time",
    "synchronize_stream", "synchronize_device", "malloc", "free", "malloc_cached", "free_cached", "memory_stats",
    "malloc_host", "free_host", "memcpy",
    "memcpy_async", "memset", "memset_async", "get_mem_info", "launch_kernel", "launch_callback", "view",
    "emulated_device", "emulated_devices", "emulated_system", "hazards", "device_can_access_peer",
    "device_enable_peer_access", "device_disable_peer_access", "get_devices_topo", "SystemProfile",
    # the ACL enums
    "CALLBACK_BLOCK", "CALLBACK_NO_BLOCK", "DDR_MEM", "EVENT_RECORDED_STATUS_COMPLETE",
    "EVENT_RECORDED_STATUS_NOT_READY", "HBM_MEM", "HBM_MEM_HUGE", "HBM_MEM_NORMAL", "MEM_MALLOC_HUGE_FIRST",
    "MEM_MALLOC_HUGE_ONLY", "MEM_MALLOC_NORMAL_ONLY", "MEMCPY_DEFAULT", "MEMCPY_DEVICE_TO_DEVICE",
    "MEMCPY_DEVICE_TO_HOST", "MEMCPY_HOST_TO_DEVICE", "MEMCPY_HOST_TO_HOST", "MEMCPY_INNER_DEVICE_TO_DEVICE",
    "MEMCPY_INTER_DEVICE_TO_DEVICE", "MEM_MALLOC_HUGE_FIRST_P2P", "MEM_MALLOC_HUGE_ONLY_P2P",
    "MEM_MALLOC_NORMAL_ONLY_P2P", "DEVICES_TOPO_HCCS", "DEVICES_TOPO_HCCS_SW", "DEVICES_TOPO_PHB",
    "DEVICES_TOPO_PIX", "DEVICES_TOPO_SIO", "DEVICES_TOPO_SYS",
]


# ---- initialization and devices ----------------------------------------------------
@api
def init(config: str | None = None, *, profile: str | DeviceProfile = "ascend910", device_count: int = 1,
         check_hazards: bool = False, system: str | SystemProfile | None = None) -> None:
    """aclInit. ``system`` (or ``config``): a system profile, built-in name or YAML path,
    whose cards share one clock and are joined by its links; otherwise ``profile`` x
    ``device_count`` independent devices."""
    if STATE.initialized:
        raise acl_error(codes.REPEAT_INITIALIZE, "acl.init() was already called")
    if isinstance(device_count, bool) or not isinstance(device_count, int) or device_count < 1:
        raise invalid_param(f"device_count must be an int >= 1, got {device_count!r}")
    chosen = system if system is not None else config
    if chosen is not None:
        sysprof = chosen if isinstance(chosen, SystemProfile) else load_system(chosen)
        STATE.server = Server(sysprof, check_hazards)
        STATE.profile, STATE.device_count = sysprof.device_profile, sysprof.count
    else:
        STATE.server = None
        STATE.profile, STATE.device_count = load_profile(profile), device_count
    STATE.check_hazards = check_hazards
    STATE.initialized = True


@api
def finalize() -> None:
    """aclFinalize: one call undoes every init; every device is reset."""
    if not STATE.initialized:
        raise acl_error(codes.REPEAT_FINALIZE, "acl.finalize() without acl.init()")
    for device_id in sorted(STATE.devices):
        STATE.teardown(device_id)
    STATE.pinned.clear()
    STATE.local.ctx = None
    STATE.server = None
    STATE.initialized = False


@api
def get_device_count() -> int:
    STATE.require_init()
    return STATE.device_count


@api
def set_device(device_id: int) -> None:
    """aclrtSetDevice: +1 on the device's count; its default context becomes current."""
    STATE.require_init()
    entry = STATE.open_device(STATE.check_device_id(device_id))
    entry.refcount += 1
    STATE.local.ctx = entry.default_ctx


@api
def reset_device(device_id: int) -> None:
    """aclrtResetDevice: -1; at 0 the device waits for its work and releases everything."""
    STATE.require_init()
    device_id = STATE.check_device_id(device_id)
    entry = STATE.devices.get(device_id)
    if entry is None or entry.refcount == 0:
        return
    entry.refcount -= 1
    if entry.refcount == 0:
        STATE.teardown(device_id)


@api
def get_device() -> int:
    return STATE.context().device_id


# ---- contexts ----------------------------------------------------------------------
@api
def create_context(device_id: int) -> Context:
    """aclrtCreateContext: a new context on ``device_id``, current for the calling thread."""
    STATE.require_init()
    device_id = STATE.check_device_id(device_id)
    entry = STATE.open_device(device_id)
    ctx = STATE.new_context(entry, device_id, entry.device.create_stream(), False)
    STATE.local.ctx = ctx
    return ctx


def _context(ctx: Any) -> Context:
    STATE.require_init()
    return live(ctx, Context, "a context")


@api
def destroy_context(ctx: Context) -> None:
    """aclrtDestroyContext: waits for its streams, then releases them and its events."""
    ctx = _context(ctx)
    if ctx.is_default:
        raise invalid_value("the default context of a device is released by reset_device, not destroyed")
    entry = STATE.entry_of(ctx.device_id)
    for s in [ctx.default_stream, *ctx.streams]:
        entry.device.destroy_stream(s)
    for e in ctx.events:
        entry.device.destroy_event(e)
    ctx.destroyed = True
    entry.contexts.remove(ctx)
    if getattr(STATE.local, "ctx", None) is ctx:
        STATE.local.ctx = None
    if entry.refcount == 0 and all(c.is_default for c in entry.contexts):
        STATE.teardown(ctx.device_id)


@api
def set_current_context(ctx: Context) -> None:
    STATE.local.ctx = _context(ctx)


@api
def get_current_context() -> Context | None:
    ctx = getattr(STATE.local, "ctx", None)
    return None if ctx is None or ctx.destroyed else ctx


# ---- streams and events ------------------------------------------------------------
@api
def create_stream(priority: int = 0) -> Stream:
    """aclrtCreateStream: ``priority`` 0 (most urgent, the default) to 7; others are clamped."""
    ctx = STATE.context()
    s = STATE.entry_of(ctx.device_id).device.create_stream(priority, ctx)
    ctx.streams.append(s)
    return s


@api
def destroy_stream(stream: Stream) -> None:
    if stream is None:
        raise invalid_param("destroy_stream needs a stream")
    dev, s = STATE.stream(stream)
    if s is s.context.default_stream:
        raise invalid_value(f"stream {s.id} is a context's default stream")
    dev.destroy_stream(s)
    s.context.streams.remove(s)


@api
def create_event() -> Event:
    ctx = STATE.context()
    ev = STATE.entry_of(ctx.device_id).device.create_event(ctx)
    ctx.events.append(ev)
    return ev


def _event_device(ev: Event) -> Device:
    return STATE.entry_of(STATE.event(ev).context.device_id).device


@api
def destroy_event(event: Event) -> None:
    _event_device(event).destroy_event(event)
    event.context.events.remove(event)


def _on_stream(event: Event, stream: Stream | None) -> tuple[Device, Stream]:
    STATE.event(event)
    dev, s = STATE.stream(stream)
    if event.context.device_id != s.context.device_id:
        raise acl_error(codes.RT_STREAM_CONTEXT, f"event {event.id} and stream {s.id} are on different devices")
    return dev, s


@api
def record_event(event: Event, stream: Stream | None) -> None:
    """aclrtRecordEvent: the event completes when the stream's earlier tasks have."""
    dev, s = _on_stream(event, stream)
    dev.record_event(event, s)


@api
def stream_wait_event(stream: Stream | None, event: Event) -> None:
    """aclrtStreamWaitEvent: later tasks on ``stream`` wait for the event's newest record."""
    dev, s = _on_stream(event, stream)
    dev.stream_wait_event(s, event)


@api
def reset_event(event: Event, stream: Stream | None) -> None:
    dev, s = _on_stream(event, stream)
    dev.reset_event(event, s)


@api
def query_event(event: Event) -> int:
    """aclrtQueryEventStatus: COMPLETE once its record ran (or if it was never recorded)."""
    done = _event_device(event).event_complete(event)
    return codes.EVENT_RECORDED_STATUS_COMPLETE if done else codes.EVENT_RECORDED_STATUS_NOT_READY


@api
def synchronize_event(event: Event) -> None:
    dev = _event_device(event)
    dev.synchronize_event(event)
    STATE.raise_faults(dev)


@api
def event_elapsed_time(start: Event, end: Event) -> float:
    """aclrtEventElapsedTime: milliseconds between two completed records on one stream."""
    dev = _event_device(start)
    _event_device(end)
    a, b = start.record_task, end.record_task
    if a is None or b is None:
        raise acl_error(codes.RT_EVENT_TIMESTAMP_INVALID, "both events must be recorded first")
    if a.stream is not b.stream:
        raise invalid_value(f"events {start.id} and {end.id} were recorded on streams "
                            f"{a.stream.id} and {b.stream.id}; elapsed time needs one stream")
    if not (dev.event_complete(start) and dev.event_complete(end)):
        raise acl_error(codes.RT_EVENT_NOT_COMPLETE, "synchronize before reading elapsed time")
    if b.end_t < a.end_t:
        raise acl_error(codes.RT_EVENT_TIMESTAMP_REVERSAL, f"event {end.id} completed before event {start.id}")
    return (b.end_t - a.end_t) / 1000.0


@api
def synchronize_stream(stream: Stream | None) -> None:
    """aclrtSynchronizeStream: block until every task enqueued on ``stream`` has run."""
    dev, s = STATE.stream(stream)
    dev.synchronize_stream(s)
    STATE.raise_faults(dev)


@api
def synchronize_device() -> None:
    dev = STATE.entry_of(STATE.context().device_id).device
    dev.synchronize_device()
    STATE.raise_faults(dev)


# ---- memory views and inspection ---------------------------------------------------
@api
def view(ptr: int, dtype: Any, shape: tuple[int, ...] | list[int]) -> Any:
    """A numpy view of device memory: how a callable kernel reads and writes tensors."""
    dt = numpy_dtype(dtype, "view")
    if not isinstance(shape, (tuple, list)) or not all(isinstance(d, (int, np.integer)) and not isinstance(d, bool)
                                                        and d >= 0 for d in shape):
        raise invalid_param(f"view shape must be a list of ints >= 0, got {shape!r}")
    if not isinstance(ptr, (int, np.integer)) or isinstance(ptr, bool):
        raise invalid_param(f"view needs a device pointer, got {ptr!r}")
    return STATE.device_of_ptr(ptr).view(int(ptr), dt, tuple(int(d) for d in shape))


@api
def emulated_system() -> SystemProfile:
    """The system profile of acl.init(system=...): ``.link(a, b)`` gives kind, bandwidth, latency."""
    STATE.require_init()
    return STATE.require_server().system


@api
def emulated_device(device_id: int | None = None) -> Device:
    """The emulated hardware behind a device (current one by default): timeline, samples, trace."""
    return STATE.entry_of(STATE.context().device_id if device_id is None else device_id).device


@api
def emulated_devices() -> dict[int, Device]:
    """Every open device by id (``graphexec.profiling.trace.server_trace`` draws them together)."""
    STATE.require_init()
    return {i: e.device for i, e in sorted(STATE.devices.items())}


@api
def hazards(device_id: int | None = None) -> list[Hazard]:
    """Races the hazard checker found (``acl.init(check_hazards=True)``)."""
    return emulated_device(device_id).hazards
