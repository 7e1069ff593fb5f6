"""What profiling keeps of one run.

The device is reset at the start of the next run, so a result keeps its own copy of the
finished tasks, the host launches and the core samples, plus the compiled plan they came
from (for tensor shapes, the memory plan and what-if schedules).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from graphexec.engine.compiled import Compiled
    from graphexec.runtime.device import Device


@dataclass(frozen=True, eq=False)
class RunRecord:
    """The finished device tasks, host launches and core samples of one run."""

    tasks: list[Any]
    launches: list[Any]
    samples: list[Any]
    compiled: "Compiled" = field(repr=False)

    @property
    def profile(self) -> Any:
        return self.compiled.profile

    @property
    def name(self) -> str:
        return self.compiled.graph.name or "graphexec"

    @classmethod
    def of(cls, dev: "Device", compiled: "Compiled") -> "RunRecord":
        """A snapshot of the run that just finished on ``dev``."""
        return cls(list(dev.sim.finished), list(dev.launches), list(getattr(dev.sim, "samples", [])), compiled)

    def activation_sizes(self) -> dict[str, int]:
        """Bytes of each activation-pool tensor in the memory plan."""
        return {e.tensor: e.size for e in self.compiled.memory_plan.entries if e.region == "activation"}
