"""The schedule: tasks on streams, with the events between them and their vector clocks."""

from __future__ import annotations

from dataclasses import dataclass, field

from graphexec.plan.clocks import Clocks
from graphexec.plan.tasks import AnyTask, Task, TaskKind

_KERNELS = (TaskKind.KERNEL, TaskKind.AICPU, TaskKind.CONTROL)


@dataclass(frozen=True)
class Schedule:
    """Per stream, its tasks in order (records and waits included), plus the launch order.

    ``stream_of[task.id]`` is the stream of every task (kernels and events; ids are dense);
    ``clock`` holds the vector clock at each task's start (what has surely finished: per
    stream, a count of tasks; ``clock.get(task.id, s)``, stored sparsely, see ``clocks.py``)
    and ``pos[task.id]`` is the task's index in its stream; together they answer
    happens-before (see :meth:`before`).
    """

    streams: list[list[AnyTask]]
    order: list[AnyTask]
    stream_of: list[int]
    num_events: int = 0
    num_event_ids: int = 0
    policy: str = "single"
    stats: dict[str, int] = field(default_factory=dict)
    clock: Clocks = field(default_factory=lambda: Clocks(0))
    pos: dict[int, int] = field(default_factory=dict)
    priorities: tuple[int | None, ...] = ()   # per stream; None: the default

    def before(self, a: AnyTask, b: AnyTask) -> bool:
        """True when ``a`` surely ends before ``b`` starts (stream order or events)."""
        return self.clock.get(b.id, self.stream_of[a.id]) > self.pos[a.id]

    def kernels(self) -> list[Task]:
        """The kernel tasks in launch order (the indices a run's tape uses); control tasks
        count, as the kernel they are in a timing-only run."""
        return [t for t in self.order if isinstance(t, Task) and t.kind in _KERNELS]
