"""What profiling keeps of one run.

The device starts a fresh simulator at the next run, so a result keeps the finished
tasks, the host launches and the simulator of its own run (core samples are built from
it only when a timeline asks), plus the plan they came from (for tensor shapes, the memory
plan and what-if schedules), the device's id and launch mode, and where the run sits on
the device's running clock (``Device.clock_us``: which clock, the run's start on it and
the host time it took): a value, never the loaded plan or the device itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, Callable

from graphexec.plan import Plan

if TYPE_CHECKING:
    from graphexec.runtime.device import Device


# called with every Result as it is made (engine/result.py): profiling from the environment
# (profiling/env.py) registers here when switched on, so every session run reaches it
RESULT_OBSERVERS: list[Callable[[Any], None]] = []


@dataclass(frozen=True, eq=False)
class RunRecord:
    """The finished device tasks, host launches and simulator of one run, and its plan."""

    tasks: list[Any]
    launches: list[Any]
    sim: Any = field(repr=False)
    plan: Plan = field(repr=False)
    device_id: int = 0
    graph_mode: bool = True
    clock: tuple[int, float, float] | None = None   # (the device's clock id, the run's start on it, its host time)

    @cached_property
    def samples(self) -> list[Any]:
        """Busy cores over time, if the simulator keeps them (empty otherwise)."""
        return list(getattr(self.sim, "samples", None) or [])

    @property
    def profile(self) -> Any:
        return self.plan.profile

    @property
    def name(self) -> str:
        return self.plan.graph.name or "graphexec"

    @property
    def graph(self) -> Any:
        return self.plan.graph

    @classmethod
    def of(cls, dev: "Device", plan: Plan) -> "RunRecord":
        """A snapshot of the run of ``plan`` that just finished on ``dev``."""
        return cls(list(dev.sim.finished), list(dev.launches), dev.sim, plan, dev.id, dev.graph_mode, clock_of(dev))

    def activation_sizes(self) -> dict[str, int]:
        """Bytes of each activation-pool tensor in the memory plan."""
        return {e.tensor: e.size for e in self.plan.memory_plan.buffers if e.region == "activation"}


@dataclass(frozen=True, eq=False)
class DeviceRun:
    """What a device ran with no compiled plan behind it (ACL calls, eager mode): the same
    tasks, launches and simulator, for the same timeline and op tables."""

    tasks: list[Any]
    launches: list[Any]
    sim: Any = field(repr=False)
    profile: Any = field(repr=False)
    device_id: int = 0
    graph_mode: bool = False
    name: str = "acl"
    graph: Any = None
    clock: tuple[int, float, float] | None = None   # as RunRecord's
    memory: tuple[list[Any], list[Any]] | None = None   # eager: (blocks, samples), ``npu._prof_memory``

    @cached_property
    def samples(self) -> list[Any]:
        return list(getattr(self.sim, "samples", None) or [])

    @classmethod
    def of(cls, dev: "Device", name: str = "acl") -> "DeviceRun":
        return cls(list(dev.sim.finished), list(dev.launches), dev.sim, dev.profile, dev.id, dev.graph_mode, name,
                   clock=clock_of(dev))


def clock_of(dev: "Device") -> tuple[int, float, float]:
    """Where the run that just finished on ``dev`` sits on its running clock."""
    return dev.clock_id, dev.clock_us, float(dev.host_t)
