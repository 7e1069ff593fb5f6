"""Which eager op allocated each device block, for the report's memory section.

While a profile collects, ``hook`` (one of ``_tensor.MEMORY_HOOKS``) logs every block taken
or given back with the card's launch count at that moment. An eager op takes its output
blocks just before it launches, so a block taken when the card had made ``n`` launches
belongs to launch ``n`` (the next one): the op's name (with ``#k``, its launch in the
profile), type and output shape and dtype come from that launch's task. Nothing is done
on the dispatch path when no profile collects memory (``MEMORY_HOOKS`` is empty); while
one does, each block taken or given back costs one tuple: the allocator's own counters
(folded with numpy on each read) are read only when its segment count changes, and the
allocated series is the running sum of the blocks' rounded sizes (blocks taken in the
profile; a plain reference: ``_prof_steps.Recorder.hook`` reads the counters each time).
"""

from __future__ import annotations

from typing import Any

from graphexec.npu._state import Card

# (card, ptr, +/-bytes asked, rounded block size, launches made, host us, reserved bytes)
Event = tuple[int, int, int, int, int, float, int]


class AllocLog:
    """The blocks taken and given back on every card since the profile began."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.reserved: dict[int, tuple[int, int]] = {}   # card -> (segments, reserved bytes) last read

    def hook(self, card: Card, ptr: int, nbytes: int) -> None:
        alloc = card.allocator
        segs, reserved = self.reserved.get(card.index, (-1, 0))
        if len(alloc.segments) != segs:
            reserved = alloc.counter("reserved_bytes")[0]
            self.reserved[card.index] = (len(alloc.segments), reserved)
        size = alloc.live[ptr].size if nbytes > 0 else 0
        self.events.append((card.index, ptr, nbytes, size, len(card.device.launches), float(card.device.host_t),
                            reserved))

    def of_card(self, index: int, launches: list[Any], first: int) -> tuple[list[Any], list[Any]]:
        """Card ``index``'s blocks ``(taken, given back, bytes, op name, op type, shape, dtype)``
        (event indices; given back = len(samples) when still held) and its samples
        ``(host us, allocated by the profile's blocks, reserved)``; ``launches`` is the card's list, ``first`` the
        first launch of the window. Blocks taken before the profile began are left out."""
        mine = [e for e in self.events if e[0] == index]
        held: dict[int, list[Any]] = {}
        blocks: list[list[Any]] = []
        samples: list[tuple[float, int, int]] = []
        allocated = 0
        block: list[Any]
        for i, (_, ptr, nbytes, size, n, t, reserved) in enumerate(mine):
            if nbytes > 0:
                held[ptr] = block = [i, len(mine), nbytes, *_op_of(launches, n, first), size]
                blocks.append(block)
                allocated += size
            elif ptr in held:
                block = held.pop(ptr)
                block[1] = i
                allocated -= block[-1]
            samples.append((t, allocated, reserved))
        return [tuple(b[:-1]) for b in blocks], samples


def _op_of(launches: list[Any], n: int, first: int) -> tuple[str, str, str, str]:
    """Name, type, output shape and dtype of launch ``n`` (the op the block was taken for)."""
    if n < first or n >= len(launches):
        return "(no launch)", "", "", ""
    task = launches[n].task
    info = task.meta.get("task")
    if info is None:   # a copy or other runtime task
        return f"{task.name or task.kind} #{n - first}", task.kind, "", ""
    return f"{task.name or info.op} #{n - first}", info.op, info.tensors[2], info.tensors[3]
