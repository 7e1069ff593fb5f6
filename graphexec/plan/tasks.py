"""The task graph: what lowering produces and the later passes schedule.

Tasks are frozen: what later passes decide about them (streams, events, the runner that
computes a task's outputs, whether it computes into its output) lives in side tables of
the schedule and the plan, keyed by task id, so a pass never changes a task it was given.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, fields
from functools import cached_property
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from graphexec.ir import Node


class TaskKind(enum.Enum):
    """What a task does on the device; the executor dispatches on it."""

    KERNEL = "kernel"          # an AI-core kernel (cube or vector unit)
    AICPU = "aicpu"            # a kernel on the AI CPU (ops run by the reference fallback)
    CONTROL = "control"        # If/Loop/Scan: a stream switch that runs its body's tasks on the device
    MEMCPY = "memcpy"
    EVENT_RECORD = "event_record"
    EVENT_WAIT = "event_wait"


class Runner(Protocol):
    """Computes a kernel task's outputs from its inputs (name -> value), into ``out`` if given."""

    def __call__(self, values: dict[str, Any], out: Any = None) -> dict[str, Any]: ...


@dataclass(frozen=True, eq=False, slots=True)
class Task:
    """One kernel task: device work and what it reads and writes.

    Attributes:
        reads/writes: value names; TaskGraph.locate maps them to buffers.
        unit: "cube", "vector" or "aicpu": which cores run it.
        flops, bytes: the work, for the roofline cost model.
        block_dim: how many independent blocks (output tiles) it splits into.
        dtype: the compute dtype, which picks the unit's peak throughput.
        node: the IR node it came from.
        conv_groups: (groups, input channels per group, output channels per group) of a grouped
            convolution (a fused kernel's head), for a profile that pads groups to its cube
            fractal (``kernels.cube.group_c0``); () for every other task.
    """

    id: int
    kind: TaskKind
    name: str
    op: str = ""
    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    unit: str = "vector"
    flops: float = 0.0
    bytes: float = 0.0
    block_dim: int = 1
    dtype: str = "float32"
    node: Node | None = None
    conv_groups: tuple[int, ...] = ()


@dataclass(frozen=True, eq=False, slots=True)
class EventTask:
    """An event record or wait that event insertion placed on ``stream``.

    ``event`` is the device event id (ids are reused once their last wait is launched);
    ``record`` is the id of the record task this task is (a record) or waits for (a wait).
    """

    id: int
    kind: TaskKind
    name: str
    stream: int
    event: int
    record: int
    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()


AnyTask = Task | EventTask

_TASK_FIELDS = {f.name: i for i, f in enumerate(fields(Task))}
_task_values = attrgetter(*_TASK_FIELDS)


def retask(task: Task, **changes: Any) -> Task:
    """``dataclasses.replace(task, **changes)`` at half its cost (one positional call, no
    walk over the fields' descriptions): the precision and L2 passes re-make a task per
    kernel, 50,000 of them in a 50,000-node graph."""
    values = list(_task_values(task))
    for name, value in changes.items():
        i = _TASK_FIELDS.get(name)
        if i is None:
            raise TypeError(f"Task has no field {name!r}")
        values[i] = value
    return Task(*values)


@dataclass(frozen=True)
class TaskGraph:
    """Kernel tasks in a valid order plus their data dependencies.

    ``alias`` maps a value that owns no bytes (a view, a no-task Concat input, an in-place
    output, listed again in ``inplace``) straight to the value it lives in (chains are
    flattened, see :func:`flatten_aliases`), ``offset`` gives its byte offset there (0
    when absent); ``deps`` maps a task id to the ids of the tasks it must follow. ``slots``
    maps a value that is a strided slice of its root (a no-task Concat's input at batch > 1,
    on an NC1HWC0 chip) to (axis, first, end) of the root's dims it covers: its bytes are one
    chunk per index before the axis, its offset the first chunk's.
    """

    tasks: list[Task]
    deps: dict[int, set[int]]
    alias: dict[str, str] = field(default_factory=dict)
    offset: dict[str, int] = field(default_factory=dict)
    inplace: dict[str, str] = field(default_factory=dict)   # output -> the input whose bytes it reuses
    slots: dict[str, tuple[int, int, int]] = field(default_factory=dict)

    @cached_property
    def flat(self) -> bool:
        """Whether every alias points straight at its root (lowering flattens them): then
        ``alias.get(name, name)`` is ``root(name)``, a lookup with no call."""
        return self.alias.keys().isdisjoint(self.alias.values())

    def root(self, name: str) -> str:
        """The value that owns the bytes ``name`` lives in."""
        if self.flat:
            return self.alias.get(name, name)
        while name in self.alias:
            name = self.alias[name]
        return name

    def locate(self, name: str) -> tuple[str, int]:
        """(root, byte offset of ``name`` inside the root)."""
        if self.flat:   # one step: the offsets were summed along the chain when it was flattened
            root = self.alias.get(name)
            return (name, 0) if root is None else (root, self.offset.get(name, 0))
        off = 0
        while name in self.alias:
            off += self.offset.get(name, 0)
            name = self.alias[name]
        return name, off


def flatten_aliases(alias: dict[str, str], offset: dict[str, int]) -> tuple[dict[str, str], dict[str, int]]:
    """Every alias pointed straight at its root, offsets summed: a chain of 100,000 views
    would otherwise cost a walk of its whole length at every lookup."""
    alias, offset = dict(alias), dict(offset)
    flat: set[str] = set()
    for start in list(alias):
        chain, name = [], start
        while name in alias and name not in flat:
            chain.append(name)
            name = alias[name]
        root, off = (alias[name], offset.get(name, 0)) if name in flat else (name, 0)
        for x in reversed(chain):
            off += offset.get(x, 0)
            alias[x], offset[x] = root, off
            flat.add(x)
    return alias, offset
