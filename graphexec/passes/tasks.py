"""The task graph: what lowering produces and the later passes schedule."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any


class TaskKind(enum.Enum):
    """What a task does on the device; the executor dispatches on it."""

    KERNEL = "kernel"          # an AI-core kernel (cube or vector unit)
    AICPU = "aicpu"            # a kernel on the AI CPU (ops run by the reference fallback)
    MEMCPY = "memcpy"
    EVENT_RECORD = "event_record"
    EVENT_WAIT = "event_wait"


@dataclass(eq=False, slots=True)
class Task:
    """One unit of device work.

    Attributes:
        reads/writes: value names; TaskGraph.locate maps them to buffers.
        unit: "cube", "vector" or "aicpu": which cores run it.
        flops, bytes: the work, for the roofline cost model.
        block_dim: how many independent blocks (output tiles) it splits into.
        runner: computes the outputs (a NodeRunner) for kernel tasks.
    """

    id: int
    kind: TaskKind
    name: str
    op: str = ""
    reads: list[str] = field(default_factory=list)
    writes: list[str] = field(default_factory=list)
    unit: str = "vector"
    flops: float = 0.0
    bytes: float = 0.0
    block_dim: int = 1
    dtype: str = "float32"     # the compute dtype, which picks the unit's peak throughput
    runner: Any = None
    node: Any = None
    stream: int = 0
    event: int | None = None


@dataclass
class TaskGraph:
    """Kernel tasks in a valid order plus their data dependencies.

    ``alias`` maps a value that owns no bytes (a view, a no-task Concat input, an in-place
    output, listed again in ``inplace``) to the value it lives in, ``offset`` gives its
    byte offset there (0 when absent); ``deps`` maps a task id to the ids of the tasks it
    must follow. Tasks name the values they read and write; :meth:`locate` finds the buffer.
    """

    tasks: list[Task]
    deps: dict[int, set[int]]
    alias: dict[str, str] = field(default_factory=dict)
    offset: dict[str, int] = field(default_factory=dict)
    inplace: dict[str, str] = field(default_factory=dict)   # output -> the input whose bytes it reuses

    def root(self, name: str) -> str:
        """The value that owns the bytes ``name`` lives in."""
        while name in self.alias:
            name = self.alias[name]
        return name

    def flatten_aliases(self) -> None:
        """Point every alias straight at its root, offsets summed: a chain of 100,000
        views would otherwise cost a walk of its whole length at every lookup."""
        flat: set[str] = set()
        for start in list(self.alias):
            chain, name = [], start
            while name in self.alias and name not in flat:
                chain.append(name)
                name = self.alias[name]
            root, off = (self.alias[name], self.offset.get(name, 0)) if name in flat else (name, 0)
            for x in reversed(chain):
                off += self.offset.get(x, 0)
                self.alias[x], self.offset[x] = root, off
                flat.add(x)

    def locate(self, name: str) -> tuple[str, int]:
        """(root, byte offset of ``name`` inside the root)."""
        off = 0
        while name in self.alias:
            off += self.offset.get(name, 0)
            name = self.alias[name]
        return name, off
