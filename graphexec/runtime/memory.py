"""Device memory: one address space whose allocations are numpy byte buffers.

A device pointer is a plain int. Every allocation is a segment of bytes at a base
address, so a pointer maps to (segment, offset) with one bisect and a tensor is a
numpy view into its segment: kernels compute on device memory, never on copies.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import numpy as np

from graphexec.errors import AclError, OutOfMemoryError

BASE_ADDRESS = 0x1_0000_0000
ADDRESS_ALIGN = 2 * 1024 * 1024   # segments start on 2 MiB boundaries, like huge pages


def invalid_value(msg: str) -> AclError:
    return AclError(107000, "ACL_ERROR_RT_PARAM_INVALID", msg)


@dataclass(eq=False, slots=True)
class Segment:
    base: int
    size: int
    data: np.ndarray     # uint8, the bytes
    tag: str = ""


class DeviceMemory:
    """Allocations of one device, with capacity accounting."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.used = 0
        self._bases: list[int] = []
        self._segments: dict[int, Segment] = {}
        self._next = BASE_ADDRESS

    def alloc(self, size: int, tag: str = "") -> int:
        """A new segment of ``size`` bytes (zeroed); its base address."""
        if size < 0:
            raise invalid_value(f"cannot allocate {size} bytes")
        if self.used + size > self.capacity:
            raise OutOfMemoryError(f"cannot allocate {size} bytes for {tag or 'malloc'}: "
                                   f"{self.used} of {self.capacity} bytes of device memory in use")
        base = self._next
        self._next += max(size, 1) + (-max(size, 1)) % ADDRESS_ALIGN
        self._segments[base] = Segment(base, size, np.zeros(size, dtype=np.uint8), tag)
        bisect.insort(self._bases, base)
        self.used += size
        return base

    def free(self, base: int) -> None:
        seg = self._segments.pop(base, None)
        if seg is None:
            raise AclError(107017, "ACL_ERROR_RT_INVALID_HANDLE",
                           f"free of {base:#x}, which is not the start of a live allocation")
        self._bases.remove(base)
        self.used -= seg.size

    def segment(self, ptr: int, nbytes: int = 0) -> tuple[Segment, int]:
        """The segment holding ``ptr`` and the offset in it; checks ``nbytes`` fit."""
        i = bisect.bisect_right(self._bases, ptr) - 1
        if i < 0:
            raise AclError(107017, "ACL_ERROR_RT_INVALID_HANDLE", f"{ptr:#x} is not device memory")
        seg = self._segments[self._bases[i]]
        off = ptr - seg.base
        if off + nbytes > seg.size or (off >= seg.size and nbytes > 0) or off > seg.size:
            raise invalid_value(f"{nbytes} bytes at {ptr:#x} run past the end of a "
                                f"{seg.size}-byte allocation at {seg.base:#x}")
        return seg, off

    def view(self, ptr: int, dtype: np.dtype | str, shape: tuple[int, ...]) -> np.ndarray:
        """A numpy view of device memory at ``ptr``."""
        dtype = np.dtype(dtype)
        n = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        seg, off = self.segment(ptr, n)
        return seg.data[off:off + n].view(dtype).reshape(shape)

    def live(self) -> list[Segment]:
        return [self._segments[b] for b in self._bases]
