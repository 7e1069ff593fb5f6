"""ACL memory calls: malloc/free, pinned host buffers, memcpy and memset.

Device pointers are ints; host buffers are numpy arrays (``malloc_host`` returns a
pinned uint8 array). A synchronous copy is done by the host at its clock (one between two cards runs over
their link while the host waits, see ``_peer.py``); an
asynchronous one is a stream task on a copy engine that reads its source when it
starts and writes its destination when it ends. As in CANN, an asynchronous copy is
only asynchronous with pinned host memory: with any other array the host waits for it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from graphexec.acl._peer import peer_copy
from graphexec.acl.state import STATE, api
from graphexec.errors import OutOfMemoryError
from graphexec.runtime import codes
from graphexec.runtime.codes import invalid_handle, invalid_param
from graphexec.runtime.device import Device
from graphexec.runtime.memory import reserved_size
from graphexec.runtime.sim import DeviceTask
from graphexec.runtime.stream import Stream

_KINDS = {codes.MEMCPY_HOST_TO_HOST: "h2h", codes.MEMCPY_HOST_TO_DEVICE: "h2d",
          codes.MEMCPY_DEVICE_TO_HOST: "d2h", codes.MEMCPY_DEVICE_TO_DEVICE: "d2d",
          codes.MEMCPY_INNER_DEVICE_TO_DEVICE: "d2d", codes.MEMCPY_INTER_DEVICE_TO_DEVICE: "d2d"}
_HBM = (codes.HBM_MEM, codes.HBM_MEM_HUGE, codes.HBM_MEM_NORMAL)


def _is_dev(x: Any) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, bool)


def _count(n: Any, what: str) -> int:
    if not _is_dev(n) or n < 0:
        raise invalid_param(f"{what} must be an int >= 0, got {n!r}")
    return int(n)


def _side(x: Any, device: bool, n: int, role: str) -> tuple[Device | None, np.ndarray, list]:
    """(device or None, the n bytes as uint8, hazard ranges) of one end of a copy."""
    if device:
        if not _is_dev(x):
            raise invalid_param(f"the {role} of a copy to or from the device must be a device pointer")
        dev = STATE.device_of_ptr(x)
        return dev, dev.memory.bytes_at(int(x), n), [(int(x), n, f"{int(x):#x}")]
    if not isinstance(x, np.ndarray):
        raise invalid_param(f"the {role} of a host copy must be a numpy array, got {type(x).__name__}")
    if not x.flags.c_contiguous or x.nbytes < n or (role == "destination" and not x.flags.writeable):
        raise invalid_param(f"host {role} must be a writable C-contiguous array of at least {n} bytes "
                            f"(got {x.nbytes} bytes)")
    return None, x.reshape(-1).view(np.uint8)[:n], []


def _ends(dst: Any, dest_max: Any, src: Any, count: Any, kind: Any) -> tuple[str, Any, Any]:
    """Check a copy's arguments; its kind name and both ends."""
    STATE.require_init()
    n, cap = _count(count, "count"), _count(dest_max, "dest_max")
    if n > cap:
        raise invalid_param(f"count {n} exceeds dest_max {cap}")
    if kind == codes.MEMCPY_DEFAULT:   # inferred from the addresses, like ACL_MEMCPY_DEFAULT
        kind = {(False, False): 0, (False, True): 1, (True, False): 2, (True, True): 3}[(_is_dev(src), _is_dev(dst))]
    if kind not in _KINDS:
        raise invalid_param(f"unknown memcpy kind {kind!r}")
    name = _KINDS[kind]
    s = _side(src, name[0] == "d", n, "source")
    d = _side(dst, name[2] == "d", n, "destination")
    return name, s, d


def _between_cards(sdev: Device | None, ddev: Device | None) -> bool:
    return sdev is not None and ddev is not None and sdev is not ddev


@api
def malloc(size: int, policy: int = codes.MEM_MALLOC_HUGE_FIRST) -> int:
    """aclrtMalloc: ``size`` bytes of HBM on the current device; a device pointer."""
    ctx = STATE.context()
    if not _is_dev(size) or size <= 0:
        raise invalid_param(f"malloc size must be an int > 0, got {size!r}")
    dev = STATE.entry_of(ctx.device_id).device
    return dev.memory.alloc(int(size), tag="malloc", reserve=reserved_size(int(size), policy))


@api
def free(ptr: int) -> None:
    """aclrtFree: waits for the device (nothing may still use the bytes), then frees."""
    dev = STATE.device_of_ptr(ptr)
    dev.synchronize_device()
    dev.memory.free(int(ptr))
    if dev.checker is not None:
        dev.checker.forget(int(ptr))


@api
def malloc_cached(size: int, stream: Stream | None = None) -> int:
    """From the device's caching allocator, for use on ``stream`` (default: the context's).

    Unlike aclrtMalloc, freed blocks stay reserved and are handed out again; a block
    that kernels on other streams used is reused only after events show they are done.
    """
    dev, s = STATE.stream(stream)
    if not _is_dev(size) or size <= 0:
        raise invalid_param(f"malloc_cached size must be an int > 0, got {size!r}")
    return dev.allocator.malloc(int(size), s)


@api
def free_cached(ptr: int) -> None:
    """Give a block back to the caching allocator; no wait for the device."""
    STATE.device_of_ptr(ptr).allocator.free(int(ptr))


@api
def memory_stats(device_id: int | None = None) -> Any:
    """The caching allocator's hits, misses, reserved and in-use bytes, fragmentation."""
    ctx = STATE.context()
    return STATE.entry_of(ctx.device_id if device_id is None else device_id).device.allocator.stats()


@api
def malloc_host(size: int) -> np.ndarray:
    """aclrtMallocHost: a pinned host buffer, as a zeroed uint8 numpy array."""
    STATE.require_init()
    if not _is_dev(size) or size <= 0:
        raise invalid_param(f"malloc_host size must be an int > 0, got {size!r}")
    try:
        arr = np.zeros(int(size), dtype=np.uint8)
    except (MemoryError, ValueError):  # ValueError: more than numpy can index
        raise OutOfMemoryError(f"cannot allocate {int(size)} bytes of pinned host memory") from None
    STATE.pinned[id(arr)] = arr
    return arr


@api
def free_host(arr: np.ndarray) -> None:
    STATE.require_init()
    if STATE.pinned.get(id(arr)) is not arr:
        raise invalid_handle("free_host of an array that malloc_host did not return, or freed twice")
    del STATE.pinned[id(arr)]


def _host_device(dev: Device | None) -> Device | None:
    if dev is not None:
        return dev
    ctx = getattr(STATE.local, "ctx", None)
    return None if ctx is None or ctx.destroyed else STATE.devices[ctx.device_id].device


@api
def memcpy(dst: Any, dest_max: int, src: Any, count: int, kind: int) -> None:
    """aclrtMemcpy: a blocking copy, done when it returns."""
    name, (sdev, sbytes, reads), (ddev, dbytes, writes) = _ends(dst, dest_max, src, count, kind)
    if _between_cards(sdev, ddev):   # over the link (or the host), and the host waits for it
        assert sdev is not None and ddev is not None
        issuer, stream = peer_copy(sdev, ddev, sbytes, dbytes, reads, writes, None)
        issuer.synchronize_stream(stream)
        return
    dev = _host_device(sdev or ddev)
    if dev is None:
        dbytes[...] = sbytes
        return
    dev.memcpy_sync(len(sbytes), name, lambda: dbytes.__setitem__(Ellipsis, sbytes),
                    reads=reads, writes=writes, name=f"memcpy {name}")


@api
def memcpy_async(dst: Any, dest_max: int, src: Any, count: int, kind: int, stream: Stream | None) -> None:
    """aclrtMemcpyAsync: a copy task on ``stream``; blocking unless host memory is pinned."""
    name, (sdev, sbytes, reads), (ddev, dbytes, writes) = _ends(dst, dest_max, src, count, kind)
    if _between_cards(sdev, ddev):
        assert sdev is not None and ddev is not None
        peer_copy(sdev, ddev, sbytes, dbytes, reads, writes, stream)
        return
    dev, s = STATE.stream(stream)
    if (sdev or ddev or dev) is not dev:
        raise codes.acl_error(codes.RT_STREAM_CONTEXT, "the copy's device is not the stream's device")
    dev.launch(DeviceTask("memcpy", s, f"memcpy {name}", unit="copy", bytes=float(len(sbytes)), copy_kind=name,
                          start_fn=sbytes.copy, end_fn=lambda data: dbytes.__setitem__(Ellipsis, data),
                          reads=reads, writes=writes))
    pageable = [x for x in (src, dst) if isinstance(x, np.ndarray) and not STATE.is_pinned(x)]
    if pageable:
        dev.synchronize_stream(s)


def _fill_args(ptr: Any, max_count: Any, value: Any, count: Any) -> tuple[Device, np.ndarray, list, int]:
    STATE.require_init()
    n, cap = _count(count, "count"), _count(max_count, "max_count")
    if n > cap:
        raise invalid_param(f"count {n} exceeds max_count {cap}")
    if not _is_dev(value) or not 0 <= value <= 255:
        raise invalid_param(f"memset value must be a byte 0..255, got {value!r}")
    dev, data, ranges = _side(ptr, True, n, "destination")
    assert dev is not None
    return dev, data, ranges, int(value)


@api
def memset(dev_ptr: int, max_count: int, value: int, count: int) -> None:
    """aclrtMemset: set ``count`` bytes at ``dev_ptr`` to ``value``, blocking."""
    dev, data, ranges, v = _fill_args(dev_ptr, max_count, value, count)
    dev.memcpy_sync(len(data), "d2d", lambda: data.fill(v), writes=ranges, name="memset")


@api
def memset_async(dev_ptr: int, max_count: int, value: int, count: int, stream: Stream | None) -> None:
    """aclrtMemsetAsync: the same as a task on ``stream``."""
    dev, data, ranges, v = _fill_args(dev_ptr, max_count, value, count)
    sdev, s = STATE.stream(stream)
    if sdev is not dev:
        raise codes.acl_error(codes.RT_STREAM_CONTEXT, "the pointer's device is not the stream's device")
    dev.launch(DeviceTask("memcpy", s, "memset", unit="copy", bytes=float(len(data)), copy_kind="d2d",
                          end_fn=lambda _: data.fill(v), writes=ranges))


@api
def get_mem_info(attr: int = codes.HBM_MEM) -> tuple[int, int]:
    """aclrtGetMemInfo: (free, total) bytes of the current device's HBM."""
    ctx = STATE.context()
    if attr not in _HBM:
        raise invalid_param(f"memory attribute {attr!r} is not modelled; use HBM_MEM")
    mem = STATE.entry_of(ctx.device_id).device.memory
    return mem.capacity - mem.used, mem.capacity
