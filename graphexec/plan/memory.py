"""The memory plan: where every tensor a task touches lives in device memory."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator

ALIGN = 512  # GE's MEM_ALIGN_SIZE


def align(n: int, to: int = ALIGN) -> int:
    return (n + to - 1) // to * to


@dataclass(frozen=True, slots=True)
class PlanEntry:
    """Where one tensor lives: region, offset in it, size, and its lifetime.

    ``alias_of`` names the buffer whose bytes the tensor shares (a view, an in-place
    output, a Concat slice; its offset is then the buffer's plus its place inside it),
    or is None for a buffer of its own.
    """

    tensor: str
    offset: int
    size: int
    region: str          # "activation", "io" or "weight"
    first: int = 0       # index of the writing task in the schedule
    last: int = 0        # index of the last reading task
    stream: int = 0
    alias_of: str | None = None


@dataclass(frozen=True)
class MemoryPlan:
    """All placements plus the sizes of each region.

    ``entries`` lists every tensor a task reads or writes that has planned bytes:
    the buffers first (``buffers``), then the tensors that live inside them.
    """

    entries: list[PlanEntry]
    region_bytes: dict[str, int]
    lower_bound_bytes: int        # live peak if the tasks ran one at a time in launch order
    no_reuse_bytes: int
    cut_bound_bytes: int | None = None   # most bytes that may be live together in the partial order
    items: list[Any] = field(default_factory=list, repr=False)    # activation lifetimes, for joint planning
    clash: list[list[int]] = field(default_factory=list, repr=False)    # their conflict lists
    joint: dict[str, Any] = field(default_factory=dict)                # what memory="joint" did and cost
    by_name: dict[str, PlanEntry] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "by_name", {e.tensor: e for e in self.entries})

    def __iter__(self) -> Iterator[PlanEntry]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    @property
    def buffers(self) -> list[PlanEntry]:
        """The entries that own their bytes."""
        return [e for e in self.entries if e.alias_of is None]

    @property
    def peak_bytes(self) -> int:
        return self.region_bytes.get("activation", 0)
