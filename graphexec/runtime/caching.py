"""A caching allocator over device memory, for direct mallocs and run-time-sized tensors.

Segments come from the device (2 MiB for requests up to 1 MiB, a request's own huge-page
multiple above that, as HUGE_FIRST allocates) and are carved into blocks: best fit, split
when the rest is worth keeping, neighbours coalesced when freed. Every block belongs to
the pool of the stream it was allocated for. A block that other streams used is handed
out again only after an event recorded on each of them at free time has completed, so a
kernel still reading it on another stream never sees its bytes reused (PyTorch's
``record_stream`` protocol, here inferred from the launches themselves).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Any

from graphexec.errors import OutOfMemoryError
from graphexec.runtime.codes import invalid_handle, invalid_param

SMALL = 1024 * 1024            # requests up to this share 2 MiB segments
SMALL_SEGMENT = 2 * 1024 * 1024
HUGE_PAGE = 2 * 1024 * 1024
MIN_SPLIT = 512                # a remainder smaller than this stays with the block


def request_size(size: int) -> int:
    """CANN's rounding of a malloc: up to a multiple of 32, plus 32."""
    return -(-size // 32) * 32 + 32


@dataclass(eq=False, slots=True)
class Block:
    segment: int
    offset: int
    size: int
    stream: Any
    free: bool = True
    used_by: set = field(default_factory=set)
    events: list = field(default_factory=list)   # recorded at free time on the other users

    @property
    def ptr(self) -> int:
        return self.segment + self.offset


@dataclass
class AllocatorStats:
    hits: int = 0
    misses: int = 0
    reserved_bytes: int = 0
    in_use_bytes: int = 0
    fragmentation: float = 0.0   # 1 - largest free block / all free bytes


class CachingAllocator:
    """Stream-aware caching allocator of one device."""

    def __init__(self, device: Any) -> None:
        self.dev = device
        self.segments: dict[int, list[Block]] = {}   # base -> blocks by offset
        self.live: dict[int, Block] = {}             # ptr -> allocated block
        self.pending: list[Block] = []
        self._hits = self._misses = 0

    def malloc(self, size: int, stream: Any) -> int:
        """A pointer to at least ``size`` bytes for use on ``stream``."""
        if size <= 0:
            raise invalid_param(f"malloc size must be > 0, got {size}")
        need = request_size(size)
        self._collect()
        block = self._best_fit(need, stream)
        if block is None:
            self._misses += 1
            block = self._new_segment(need, stream)
        else:
            self._hits += 1
        self._split(block, need)
        block.free = False
        block.used_by = {stream}
        self.live[block.ptr] = block
        return block.ptr

    def note_use(self, ptr: int, stream: Any) -> None:
        """A task on ``stream`` touches ``ptr``: remember it (record_stream)."""
        block = self._block_at(ptr)
        if block is not None:
            block.used_by.add(stream)

    def free(self, ptr: int) -> None:
        """Return a block; reusable at once on its own stream, after events on others."""
        block = self.live.pop(ptr, None)
        if block is None:
            raise invalid_handle(f"free of {ptr:#x}, which the caching allocator did not hand out or freed twice")
        others = [s for s in block.used_by if s is not block.stream and not s.destroyed]
        for s in sorted(others, key=lambda s: s.id):
            ev = self.dev.create_event()
            self.dev.record_event(ev, s)
            block.events.append(ev)
        if block.events:
            self.pending.append(block)
        else:
            self._release(block)

    def empty_cache(self) -> None:
        """Give wholly free segments back to the device."""
        self._collect()
        for base, blocks in list(self.segments.items()):
            if len(blocks) == 1 and blocks[0].free and not blocks[0].events:
                self.dev.memory.free(base)
                del self.segments[base]

    def stats(self) -> AllocatorStats:
        free = [b.size for bs in self.segments.values() for b in bs if b.free]
        total_free = sum(free)
        return AllocatorStats(self._hits, self._misses,
                              sum(self.dev.memory.segment(base)[0].size for base in self.segments),
                              sum(b.size for b in self.live.values()),
                              (1 - max(free) / total_free) if total_free else 0.0)

    # ---- internals ---------------------------------------------------------------
    def _collect(self) -> None:
        """Blocks whose events all completed become free for their stream again."""
        still = []
        for block in self.pending:
            if all(self.dev.event_complete(ev) for ev in block.events):
                for ev in block.events:
                    self.dev.destroy_event(ev)
                block.events = []
                self._release(block)
            else:
                still.append(block)
        self.pending = still

    def _best_fit(self, need: int, stream: Any) -> Block | None:
        fits = [b for bs in self.segments.values() for b in bs
                if b.free and not b.events and b.stream is stream and b.size >= need]
        return min(fits, key=lambda b: (b.size, b.segment, b.offset), default=None)

    def _new_segment(self, need: int, stream: Any) -> Block:
        size = SMALL_SEGMENT if need <= SMALL else -(-need // HUGE_PAGE) * HUGE_PAGE
        try:
            base = self.dev.memory.alloc(size, tag="caching allocator", reserve=size)
        except OutOfMemoryError:
            self.empty_cache()   # as PyTorch does: give back cached segments, then retry once
            base = self.dev.memory.alloc(size, tag="caching allocator", reserve=size)
        block = Block(base, 0, size, stream)
        self.segments[base] = [block]
        return block

    def _split(self, block: Block, need: int) -> None:
        rest = block.size - need
        if rest < MIN_SPLIT:
            return
        blocks = self.segments[block.segment]
        tail = Block(block.segment, block.offset + need, rest, block.stream)
        blocks.insert(blocks.index(block) + 1, tail)
        block.size = need

    def _release(self, block: Block) -> None:
        block.free = True
        block.used_by = set()
        blocks = self.segments[block.segment]
        i = blocks.index(block)
        for j in (i + 1, i - 1):   # coalesce with free neighbours of the same pool
            if 0 <= j < len(blocks):
                other = blocks[j]
                if other.free and not other.events and other.stream is block.stream:
                    first, second = (block, other) if j > i else (other, block)
                    first.size += second.size
                    blocks.remove(second)
                    block = first
                    i = blocks.index(block)

    def _block_at(self, ptr: int) -> Block | None:
        bases = sorted(self.segments)
        k = bisect.bisect_right(bases, ptr) - 1
        if k < 0:
            return None
        for b in self.segments[bases[k]]:
            if b.ptr <= ptr < b.ptr + b.size and not b.free:
                return b
        return None
