"""A caching allocator over device memory, for direct mallocs and run-time-sized tensors.

Segments come from the device and are carved into blocks: best fit, split when the rest
is worth keeping, neighbours coalesced when freed. Every block belongs to the pool of the
stream it was allocated for. A block that other streams used is handed out again only
after an event recorded on each of them at free time has completed, so a kernel still
reading it on another stream never sees its bytes reused (PyTorch's ``record_stream``).

Two rule sets (:class:`Rules`): ``CANN`` (acl.malloc_cached, the engine's run-time
tensors) rounds like aclrtMalloc, takes 2 MiB segments for requests up to 1 MiB and a
request's own huge-page multiple above, and learns the streams that use a block from
the launches themselves (``Device.launch`` tells its own allocator). ``TORCH`` (graphexec.npu) follows PyTorch's
CUDACachingAllocator: 512-byte rounding, separate small (<= 1 MiB, 2 MiB segments) and
large pools (1-10 MiB requests cut from 20 MiB segments, larger ones rounded to 2 MiB),
large blocks split only when more than 1 MiB is left, ``max_split_size`` blocks never
split, and only ``record_stream`` marks another stream's use.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Any

import numpy as np

from graphexec.errors import OutOfMemoryError
from graphexec.runtime.codes import invalid_handle, invalid_param

MiB = 1024 * 1024
SMALL = 1 * MiB                # requests up to this share 2 MiB segments
SMALL_SEGMENT = 2 * MiB
HUGE_PAGE = 2 * MiB
MIN_SPLIT = 512                # a remainder smaller than this stays with the block
MIN_LARGE_ALLOC = 10 * MiB     # torch kMinLargeAlloc: below it, large requests take 20 MiB segments
LARGE_SEGMENT = 20 * MiB       # torch kLargeBuffer
STAT_NAMES = ("allocation", "segment", "active", "allocated_bytes", "reserved_bytes", "active_bytes",
              "requested_bytes")
_STAT = {name: i for i, name in enumerate(STAT_NAMES)}
MALLOC, FREE, RELEASE, SEGMENT, UNSEGMENT = range(5)
LOG_LIMIT = 1 << 13   # ints logged before a fold: 4,096 events, whose arrays stay in the CPU's cache
_NOBODY: frozenset[Any] = frozenset()   # the users of a free block
# per event kind (MALLOC, FREE, RELEASE, SEGMENT, UNSEGMENT): the sign it adds to the allocations,
# the segments and the active blocks; the byte stats follow the same signs times the size
# (requested_bytes: the allocations' sign times the size asked for)
_SIGNS = np.array([[1, 0, 1], [-1, 0, 0], [0, 0, -1], [0, 1, 0], [0, -1, 0]], np.int64)

def _unidle(blocks: list[tuple[int, int, int, "Block"]], block: "Block") -> None:
    """Take ``block`` out of ``blocks``, its pool's idle index, if it is there."""
    k = bisect.bisect_left(blocks, (block.size, block.segment, block.offset))
    if k < len(blocks) and blocks[k][3] is block:
        del blocks[k]


def request_size(size: int) -> int:
    """CANN's rounding of a malloc: up to a multiple of 32, plus 32."""
    return -(-size // 32) * 32 + 32


def _up(n: int, to: int) -> int:
    return -(-n // to) * to


@dataclass(frozen=True)
class Rules:
    """How an allocator rounds, sizes segments and splits (``torch``: PyTorch's rules)."""

    torch: bool = False
    max_split_size: int | None = None  # torch: blocks this large are never split
    expandable: bool = False           # torch expandable_segments: reserve grows by 2 MiB pages

    def segment_size(self, need: int) -> int:
        if need <= SMALL:
            return SMALL_SEGMENT
        if self.torch and not self.expandable and need < MIN_LARGE_ALLOC:
            return LARGE_SEGMENT
        return _up(need, HUGE_PAGE)

    def can_split(self, rest: int, small: bool, size: int) -> bool:
        if not self.torch:
            return rest >= MIN_SPLIT
        if self.max_split_size is not None and size >= self.max_split_size and not small:
            return False
        return rest >= MIN_SPLIT if small else rest > SMALL

    def fits(self, block: "Block", need: int) -> bool:
        """torch: an oversize block serves only a request that is itself oversize, and
        wastes less than a large segment doing so."""
        if not self.torch or block.small or self.max_split_size is None:
            return True
        if need < self.max_split_size:
            return block.size < self.max_split_size
        return block.size < need + LARGE_SEGMENT


CANN = Rules()
TORCH = Rules(torch=True)


class Counters:
    """PyTorch's four numbers (current, peak, allocated, freed) of each stat per pool. Events
    are logged as they happen (a tuple append: the allocator sits on every op's path) and
    folded in order, peaks included, when the numbers are read or the log grows long."""

    POOLS = ("all", "small_pool", "large_pool")

    def __init__(self) -> None:
        self.log: list[int] = []   # two ints per event: size << 4 | kind << 1 | small, then the size asked for
        self.values = {p: np.zeros((4, len(STAT_NAMES)), np.int64) for p in self.POOLS}

    def get(self, name: str, pool: str = "all") -> tuple[int, int, int, int]:
        self.fold()
        col = self.values[pool][:, _STAT[name]]
        return int(col[0]), int(col[1]), int(col[2]), int(col[3])

    def reset_peaks(self) -> None:
        self.fold()
        for v in self.values.values():
            v[1] = v[0]

    def fold(self) -> None:
        """The logged events into the numbers, in order: each stat's deltas summed along the
        log (current), their running maximum (peak), their positive and negative parts
        (allocated, freed)."""
        if not self.log:
            return
        ev = np.array(self.log, dtype=np.int64).reshape(-1, 2)
        self.log = []
        head = ev[:, 0]
        signs = _SIGNS[(head >> 1) & 7]   # columns in STAT_NAMES order: 3 counts, 3 sizes, the size asked
        deltas = np.empty((len(ev), len(STAT_NAMES)), np.int64)
        deltas[:, :3] = signs
        np.multiply(signs, (head >> 4)[:, None], out=deltas[:, 3:6])
        np.multiply(signs[:, 0], ev[:, 1], out=deltas[:, 6])
        small = (head & 1) == 1
        n_small = int(np.count_nonzero(small))
        parts = [("all", deltas)]
        if n_small == len(ev) or n_small == 0:   # one pool: its rows are all of them
            parts.append(("small_pool" if n_small else "large_pool", deltas))
        else:
            parts += [("small_pool", deltas[small]), ("large_pool", deltas[~small])]
        sums: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        for pool, rows in parts:
            if id(rows) not in sums:
                run = np.cumsum(rows, axis=0)
                sums[id(rows)] = (run.max(axis=0), run[-1], np.maximum(rows, 0).sum(axis=0))
            top, total, grown = sums[id(rows)]
            v = self.values[pool]
            v[1] = np.maximum(v[1], v[0] + top)
            v[0] += total
            v[2] += grown
            v[3] += grown - total

    def append(self, small: bool, kind: int, size: int, asked: int = 0) -> None:
        """Log an event as plain ints (never tracked by the garbage collector, unlike tuples)."""
        self.log += (size << 4 | kind << 1 | small, asked)
        if len(self.log) >= LOG_LIMIT:
            self.fold()


@dataclass(eq=False, slots=True)
class Block:
    segment: int
    offset: int
    size: int
    stream: Any
    free: bool = True
    used_by: Any = frozenset()    # the streams using it; a set of its own while allocated
    events: Any = ()              # recorded at free time on the other users
    small: bool = True
    requested: int = 0

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

    def __init__(self, device: Any, rules: Rules = CANN) -> None:
        self.dev = device
        self.rules = rules
        self.segments: dict[int, list[Block]] = {}   # base -> blocks by offset
        self.live: dict[int, Block] = {}             # ptr -> allocated block
        self.pending: list[Block] = []
        # free blocks with no event pending, best fit's choice: per (stream, pool) sorted by
        # (size, segment, offset), so a fit is a bisection, not a scan of every idle block
        self._idle: dict[tuple[Any, bool], list[tuple[int, int, int, Block]]] = {}
        self._hits = self._misses = 0
        self.counters = Counters()
        self.retries = self.ooms = 0

    def malloc(self, size: int, stream: Any) -> int:
        """A pointer to at least ``size`` bytes for use on ``stream``."""
        if size <= 0:
            raise invalid_param(f"malloc size must be > 0, got {size}")
        rules = self.rules
        need = -(-size // MIN_SPLIT) * MIN_SPLIT if rules.torch else request_size(size)
        small = need <= SMALL
        if self.pending:
            self._collect()
        idle = self._idle.get((stream, small or not rules.torch))
        if idle and rules.max_split_size is None:   # ``_take``, inline
            k = bisect.bisect_left(idle, (need,))
            block = idle.pop(k)[3] if k < len(idle) else None
        else:
            block = self._take(need, stream, small)
        if block is None:
            self._misses += 1
            block = self._new_segment(need, stream, small)
        else:
            self._hits += 1
        rest = block.size - need
        # every rule splits only past MIN_SPLIT, and a small block (all of CANN's) past that alone
        if rest >= MIN_SPLIT and (block.small or rules.can_split(rest, False, block.size)):
            self._split(block, need)
        block.free = False
        block.used_by = {stream}
        block.requested = size
        ptr = block.segment + block.offset
        self.live[ptr] = block
        log = self.counters.log
        log += (block.size << 4 | MALLOC << 1 | block.small, size)
        if len(log) >= LOG_LIMIT:   # bounded: a program that never asks still folds now and then
            self.counters.fold()
        return ptr

    def note_use(self, ptr: int, stream: Any) -> None:
        """A task on ``stream`` touches ``ptr``: remember it (record_stream)."""
        block = self.live.get(ptr) or self._block_at(ptr)
        if block is not None:
            block.used_by.add(stream)

    def free(self, ptr: int) -> None:
        """Return a block; reusable at once on its own stream, after events on others."""
        block = self.live.pop(ptr, None)
        if block is None:
            raise invalid_handle(f"free of {ptr:#x}, which the caching allocator did not hand out or freed twice")
        self.counters.log += (block.size << 4 | FREE << 1 | block.small, block.requested)
        if len(block.used_by) > 1:
            others = [s for s in block.used_by if s is not block.stream and not s.destroyed]
            events = []
            for s in sorted(others, key=lambda s: s.id):
                ev = self.dev.create_event()
                self.dev.record_event(ev, s)
                events.append(ev)
            if events:
                block.events = events
                self.pending.append(block)
                return
        self._release(block)

    def empty_cache(self) -> None:
        """Give wholly free segments back to the device."""
        self._collect()
        for base, blocks in list(self.segments.items()):
            if len(blocks) == 1 and blocks[0].free and not blocks[0].events:
                self.counters.append(blocks[0].small, UNSEGMENT, blocks[0].size)
                self._unidle(blocks[0])
                self.dev.memory.free(base)
                del self.segments[base]

    def stats(self) -> AllocatorStats:
        free = [b.size for bs in self.segments.values() for b in bs if b.free]
        total_free = sum(free)
        return AllocatorStats(self._hits, self._misses,
                              sum(self.dev.memory.segment(base)[0].size for base in self.segments),
                              sum(b.size for b in self.live.values()),
                              (1 - max(free) / total_free) if total_free else 0.0)

    def counter(self, name: str, pool: str = "all") -> tuple[int, int, int, int]:
        """(current, peak, allocated, freed) of one of STAT_NAMES, as PyTorch counts them."""
        return self.counters.get(name, pool)

    def reset_peaks(self) -> None:
        self.counters.reset_peaks()

    # ---- internals ---------------------------------------------------------------
    def _collect(self) -> None:
        """Blocks whose events all completed become free for their stream again."""
        still = []
        for block in self.pending:
            if all(self.dev.event_complete(ev) for ev in block.events):
                for ev in block.events:
                    self.dev.destroy_event(ev)
                block.events = ()
                self._release(block)
            else:
                still.append(block)
        self.pending = still

    def _take(self, need: int, stream: Any, small: bool) -> Block | None:
        """The smallest idle block of ``stream``'s pool that serves ``need`` (ties: lowest
        address), taken out of the idle index."""
        rules = self.rules
        blocks = self._idle.get((stream, small or not rules.torch))
        if not blocks:
            return None
        k = bisect.bisect_left(blocks, (need,))
        if rules.max_split_size is not None:
            while k < len(blocks) and not rules.fits(blocks[k][3], need):
                k += 1
        return blocks.pop(k)[3] if k < len(blocks) else None

    def _reidle(self, block: Block) -> None:
        key = (block.stream, block.small)
        blocks = self._idle.get(key)
        if blocks is None:
            blocks = self._idle[key] = []
        bisect.insort(blocks, (block.size, block.segment, block.offset, block))

    def _unidle(self, block: Block) -> None:
        """Take ``block`` out of the idle index if it is there (before its size changes)."""
        blocks = self._idle.get((block.stream, block.small))
        if blocks:
            _unidle(blocks, block)

    def _new_segment(self, need: int, stream: Any, small: bool) -> Block:
        size = self.rules.segment_size(need)
        try:
            base = self.dev.memory.alloc(size, tag="caching allocator", reserve=size)
        except OutOfMemoryError:
            self.retries += 1
            self.empty_cache()   # as PyTorch does: give back cached segments, then retry once
            try:
                base = self.dev.memory.alloc(size, tag="caching allocator", reserve=size)
            except OutOfMemoryError:
                self.ooms += 1
                raise
        block = Block(base, 0, size, stream, small=small or not self.rules.torch)
        self.segments[base] = [block]
        self.counters.append(block.small, SEGMENT, size)
        return block

    def _split(self, block: Block, need: int) -> None:
        """Cut ``block`` to ``need`` bytes; the rest is an idle block of its own (``malloc``
        has checked that the rules let it split)."""
        blocks = self.segments[block.segment]
        rest = block.size - need
        tail = Block(block.segment, block.offset + need, rest, block.stream, True, _NOBODY, (), block.small)
        blocks.insert(blocks.index(block) + 1, tail)
        block.size = need
        key = (tail.stream, tail.small)   # ``_reidle(tail)``, inline
        idle = self._idle.get(key)
        if idle is None:
            idle = self._idle[key] = []
        bisect.insort(idle, (rest, tail.segment, tail.offset, tail))

    def _release(self, block: Block) -> None:
        """``block`` free again: coalesced with free neighbours of its pool, back in the idle
        index (a segment holds one pool's blocks, so the neighbours' index is its own)."""
        self.counters.log += (block.size << 4 | RELEASE << 1 | block.small, 0)
        block.free = True
        block.used_by = _NOBODY
        stream, key = block.stream, (block.stream, block.small)
        idle = self._idle.get(key)
        if idle is None:
            idle = self._idle[key] = []
        blocks = self.segments[block.segment]
        i = blocks.index(block)
        if i + 1 < len(blocks):   # coalesce with free neighbours of the same pool: the next one ...
            other = blocks[i + 1]
            if other.free and not other.events and other.stream is stream:
                _unidle(idle, other)
                block.size += other.size
                del blocks[i + 1]
        if i > 0:                 # ... then the one before
            other = blocks[i - 1]
            if other.free and not other.events and other.stream is stream:
                _unidle(idle, other)
                other.size += block.size
                del blocks[i]
                block = other
        bisect.insort(idle, (block.size, block.segment, block.offset, block))   # ``_reidle(block)``, inline

    def _block_at(self, ptr: int) -> Block | None:
        bases = sorted(self.segments)
        k = bisect.bisect_right(bases, ptr) - 1
        if k < 0:
            return None
        for b in self.segments[bases[k]]:
            if b.ptr <= ptr < b.ptr + b.size and not b.free:
                return b
        return None
