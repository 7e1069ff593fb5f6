"""Device memory: one address space whose allocations are numpy byte buffers.

A device pointer is a plain int. Every allocation is a segment of bytes at a base
address, so a pointer maps to (segment, offset) with one bisect and a tensor is a
numpy view into its segment: kernels compute on device memory, never on copies.
Capacity is charged as CANN charges it (see ``reserved_size``), while bounds are
checked against the bytes asked for, so an off-by-one copy is caught, not padded over.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass

import numpy as np

from graphexec.errors import OutOfMemoryError
from graphexec.runtime.codes import (
    MEM_MALLOC_HUGE_FIRST,
    MEM_MALLOC_HUGE_ONLY,
    MEM_MALLOC_NORMAL_ONLY,
    invalid_handle,
    invalid_param,
    invalid_value,
)

BASE_ADDRESS = 0x1_0000_0000
DEVICE_STRIDE = 0x100_0000_0000_0000   # address space per device id: pointers never collide
ADDRESS_ALIGN = 2 * 1024 * 1024   # segments start on 2 MiB boundaries, like huge pages
NORMAL_PAGE = 4 * 1024            # the runtime article: "4KB page"
HUGE_PAGE = 2 * 1024 * 1024
HUGE_THRESHOLD = 1024 * 1024      # facts §1: HUGE_FIRST serves <= 1 MB from normal pages

__all__ = ["DeviceMemory", "Segment", "reserved_size", "invalid_value"]


def _round_up(n: int, to: int) -> int:
    return -(-n // to) * to


def reserved_size(size: int, policy: int = MEM_MALLOC_HUGE_FIRST) -> int:
    """Bytes aclrtMalloc takes from HBM for ``size``: round up to 32 plus 32, then to pages."""
    if isinstance(policy, int) and policy in (3, 4, 5):   # the *_P2P policies: placed like their base one
        policy -= 3
    if policy not in (MEM_MALLOC_HUGE_FIRST, MEM_MALLOC_HUGE_ONLY, MEM_MALLOC_NORMAL_ONLY):
        raise invalid_param(f"unknown malloc policy {policy!r}")
    aligned = _round_up(size, 32) + 32
    huge = policy == MEM_MALLOC_HUGE_ONLY or (policy == MEM_MALLOC_HUGE_FIRST and aligned > HUGE_THRESHOLD)
    return _round_up(aligned, HUGE_PAGE if huge else NORMAL_PAGE)


@dataclass(eq=False, slots=True)
class Segment:
    base: int
    size: int            # bytes asked for: the valid range
    data: np.ndarray     # uint8, the bytes
    tag: str = ""
    reserved: int = 0    # bytes charged against capacity


class DeviceMemory:
    """Allocations of one device, with capacity accounting."""

    def __init__(self, capacity: int, device_id: int = 0) -> None:
        self.capacity = capacity
        self.used = 0
        self._bases: list[int] = []
        self._segments: dict[int, Segment] = {}
        self._freed: set[int] = set()
        self._next = BASE_ADDRESS + device_id * DEVICE_STRIDE

    def alloc(self, size: int, tag: str = "", reserve: int | None = None) -> int:
        """A new zeroed segment of ``size`` bytes, charged ``reserve`` bytes; its address."""
        if size < 0:
            raise invalid_value(f"cannot allocate {size} bytes")
        charge = size if reserve is None else reserve
        if self.used + charge > self.capacity:
            raise OutOfMemoryError(f"cannot allocate {size} bytes for {tag or 'malloc'}: "
                                   f"{self.used} of {self.capacity} bytes of device memory in use")
        base = self._next
        self._next += _round_up(max(size, 1), ADDRESS_ALIGN)
        try:
            data = np.zeros(size, dtype=np.uint8)
        except (MemoryError, ValueError):   # the emulated HBM lives in host memory, which has less
            raise OutOfMemoryError(f"cannot allocate {size} bytes for {tag or 'malloc'}: the host cannot back "
                                   "that much emulated device memory") from None
        self._segments[base] = Segment(base, size, data, tag, charge)
        self._bases.append(base)  # addresses only grow, so the list stays sorted
        self.used += charge
        return base

    def free(self, base: int) -> None:
        seg = self._segments.pop(base, None)
        if seg is None:
            why = "was already freed" if base in self._freed else "is not the start of a live allocation"
            raise invalid_handle(f"free of {_hex(base)}, which {why}")
        self._bases.remove(base)
        self._freed.add(base)
        self.used -= seg.reserved

    def free_all(self) -> None:
        """Release every allocation (device reset)."""
        for base in list(self._bases):
            self.free(base)

    def segment(self, ptr: int, nbytes: int = 0) -> tuple[Segment, int]:
        """The segment holding ``ptr`` and the offset in it; checks ``nbytes`` fit."""
        i = bisect.bisect_right(self._bases, ptr) - 1
        seg = self._segments[self._bases[i]] if i >= 0 else None
        if seg is None or ptr - seg.base > seg.size:
            raise invalid_value(f"{_hex(ptr)} is not inside a live device allocation")
        off = ptr - seg.base
        if nbytes < 0 or off + nbytes > seg.size:
            raise invalid_value(f"{nbytes} bytes at {_hex(ptr)} run past the end of a "
                                f"{seg.size}-byte allocation at {_hex(seg.base)}")
        return seg, off

    def bytes_at(self, ptr: int, nbytes: int) -> np.ndarray:
        """The raw uint8 view of ``nbytes`` at ``ptr``."""
        seg, off = self.segment(ptr, nbytes)
        return seg.data[off:off + nbytes]

    def extent(self, ptr: int) -> int:
        """Bytes from ``ptr`` to the end of its allocation."""
        seg, off = self.segment(ptr)
        return seg.size - off

    def view(self, ptr: int, dtype: np.dtype | str, shape: tuple[int, ...]) -> np.ndarray:
        """A numpy view of device memory at ``ptr``."""
        dtype = np.dtype(dtype)
        if dtype.hasobject or dtype.itemsize == 0:
            raise invalid_value(f"device memory holds bytes, not {dtype} values")
        seg, off = self.segment(ptr, math.prod(shape) * dtype.itemsize)
        return np.ndarray(shape, dtype, seg.data, off)   # one call for what slicing, view and reshape make

    def live(self) -> list[Segment]:
        return [self._segments[b] for b in self._bases]


def _hex(ptr: object) -> str:
    return f"{ptr:#x}" if isinstance(ptr, int) else repr(ptr)
