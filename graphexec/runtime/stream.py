"""Streams and events: the ordering objects of the runtime."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from graphexec.runtime.sim_task import DeviceTask


@dataclass(eq=False)
class Stream:
    """A FIFO command queue; ``priority`` 0 is the most urgent, 7 the least."""

    id: int
    priority: int = 0
    queue: deque = field(default_factory=deque)
    active: Any = None
    pending: int = 0              # enqueued and not yet finished
    last_end: float = 0.0
    destroyed: bool = False
    context: Any = None
    core_limit: dict[str, int] | None = None   # unit -> most cores its kernels may hold (set_stream_limit)

    def __repr__(self) -> str:
        return f"Stream({self.id})"


@dataclass(eq=False)
class Event:
    """Completes when the record task most recently enqueued for it has run."""

    id: int
    record_task: Any = None        # the DeviceTask of the newest record
    destroyed: bool = False
    context: Any = None

    @property
    def complete_t(self) -> float | None:
        task = self.record_task
        return None if task is None else task.end_t

    def is_complete_at(self, now: float) -> bool:
        task = self.record_task
        return task is not None and task.end_t is not None and task.end_t <= now

    def __repr__(self) -> str:
        return f"Event({self.id})"


@dataclass(frozen=True, slots=True)
class EventSnapshot:
    """A wait binds to the record that was newest when the wait was enqueued."""

    record_task: DeviceTask

    def is_complete_at(self, now: float) -> bool:
        return self.record_task.end_t is not None and self.record_task.end_t <= now

    @property
    def id(self) -> int:
        return self.record_task.event.id
