"""Streams and events: the ordering objects of the runtime."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any


@dataclass(eq=False)
class Stream:
    """A FIFO command queue; ``priority`` 0 is the most urgent, 7 the least."""

    id: int
    priority: int = 4
    queue: deque = field(default_factory=deque)
    active: Any = None
    last_end: float = 0.0
    destroyed: bool = False
    submitted: list = field(default_factory=list)

    def __repr__(self) -> str:
        return f"Stream({self.id})"


@dataclass(eq=False)
class Event:
    """Completes when the record task most recently enqueued for it has run."""

    id: int
    record_task: Any = None        # the DeviceTask of the newest record
    complete_t: float | None = None
    destroyed: bool = False

    def complete(self, t: float) -> None:
        self.complete_t = t

    def is_complete_at(self, now: float) -> bool:
        return self.record_task is not None and self.record_task.end_t is not None and self.record_task.end_t <= now

    def __repr__(self) -> str:
        return f"Event({self.id})"
