"""Stream assignment: which stream runs each task, in which order.

The foundation has one policy, ``single``: every task on stream 0 in topological
order, so no event is ever needed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from graphexec.passes.base import CompileState, Pass, PassResult
from graphexec.passes.tasks import Task


@dataclass
class Schedule:
    """Per stream, the tasks it runs in order (event records and waits included)."""

    streams: list[list[Task]]
    num_events: int = 0
    policy: str = "single"
    stats: dict[str, int] = field(default_factory=dict)

    @property
    def order(self) -> list[Task]:
        """Every task once, in launch order (round-robin is not needed on one stream)."""
        return [t for s in self.streams for t in s]


class StreamAssignment(Pass):
    name = "streams"

    def call(self, state: CompileState) -> PassResult:
        for t in state.tasks.tasks:
            t.stream = 0
        state.schedule = Schedule([list(state.tasks.tasks)])
        return PassResult(state, True)
