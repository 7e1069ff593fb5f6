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
        reads/writes: value names (after aliasing, the buffers they live in).
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

    ``alias`` maps a view's value name to the value whose bytes it shares; ``deps``
    maps a task id to the ids of the tasks it must follow.
    """

    tasks: list[Task]
    deps: dict[int, set[int]]
    alias: dict[str, str] = field(default_factory=dict)

    def root(self, name: str) -> str:
        """The value that owns the bytes ``name`` lives in."""
        while name in self.alias:
            name = self.alias[name]
        return name
