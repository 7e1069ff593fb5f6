"""What profiling keeps of one run.

The device starts a fresh simulator at the next run, so a result keeps the finished
tasks, the host launches and the simulator of its own run (core samples are built from
it only when a timeline asks), plus the compiled plan they came from (for tensor shapes,
the memory plan and what-if schedules).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from graphexec.engine.compiled import Compiled
    from graphexec.runtime.device import Device


@dataclass(frozen=True, eq=False)
class RunRecord:
    """The finished device tasks, host launches and simulator of one run."""

    tasks: list[Any]
    launches: list[Any]
    sim: Any = field(repr=False)
    compiled: "Compiled" = field(repr=False)

    @cached_property
    def samples(self) -> list[Any]:
        """Busy cores over time, if the simulator keeps them (empty otherwise)."""
        return list(getattr(self.sim, "samples", None) or [])

    @property
    def profile(self) -> Any:
        return self.compiled.profile

    @property
    def name(self) -> str:
        return self.compiled.graph.name or "graphexec"

    @classmethod
    def of(cls, dev: "Device", compiled: "Compiled") -> "RunRecord":
        """A snapshot of the run that just finished on ``dev``."""
        return cls(list(dev.sim.finished), list(dev.launches), dev.sim, compiled)

    def activation_sizes(self) -> dict[str, int]:
        """Bytes of each activation-pool tensor in the memory plan."""
        return {e.tensor: e.size for e in self.compiled.memory_plan.buffers if e.region == "activation"}
