"""One pass contract: ``Pass.call(state) -> PassResult``, run in order by a PassManager.

The state a pass sees is a frozen :class:`CompileState`: the graph being compiled plus
the products of earlier passes (task graph, schedule, memory plan, ...) in typed fields.
A pass returns a new state (``dataclasses.replace``) and never changes what it was given.
``requires``/``ensures`` check a pass's contract; they run when ``CHECK_CONTRACTS`` is
on (the tests switch it on; ``GRAPHEXEC_CHECK=1`` does too) and raise ``InvariantError``.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Mapping

from graphexec.errors import GraphExecError, InvariantError
from graphexec.ir import Graph
from graphexec.plan import Bounds, CompileOptions, MemoryPlan, Plan, Runner, Schedule, TaskGraph, ThreadPlan
from graphexec.runtime.profiles import DeviceProfile

log = logging.getLogger(__name__)
CHECK_CONTRACTS = os.environ.get("GRAPHEXEC_CHECK", "") not in ("", "0")


@dataclass(frozen=True)
class CompileState:
    """Everything compilation knows so far; each pass returns it with its own fields set.

    ``runners`` maps a kernel task's id to what computes its outputs (lowering makes
    them, host fusion replaces some); ``direct`` holds the ids of the tasks that compute
    straight into their output bytes; ``fused`` counts the tasks whose math their chain's
    head does.
    """

    graph: Graph
    options: CompileOptions
    profile: DeviceProfile
    tasks: TaskGraph | None = None
    runners: Mapping[int, Runner] = field(default_factory=lambda: MappingProxyType({}))
    schedule: Schedule | None = None
    memory_plan: MemoryPlan | None = None
    fused: int = 0
    direct: frozenset[int] = frozenset()
    bounds: Bounds | None = None
    threads: ThreadPlan | None = None
    timings: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))

    def need_tasks(self) -> TaskGraph:
        return _need(self.tasks, "tasks")

    def need_schedule(self) -> Schedule:
        return _need(self.schedule, "schedule")

    def need_memory_plan(self) -> MemoryPlan:
        return _need(self.memory_plan, "memory_plan")

    def need_bounds(self) -> Bounds:
        return _need(self.bounds, "bounds")

    def plan(self) -> Plan:
        """The frozen plan, once every pass that makes a part of it has run."""
        return Plan(self.graph, self.options, self.profile, self.need_tasks(), self.need_schedule(),
                    self.need_memory_plan(), self.need_bounds(), self.runners, self.fused, self.direct, self.threads,
                    self.timings)


def _need(value: Any, name: str) -> Any:
    if value is None:
        raise InvariantError(f"the state has no {name} yet: a pass that makes it must run first")
    return value


@dataclass(frozen=True, slots=True)
class PassResult:
    state: CompileState
    modified: bool


class Pass:
    """Base of every pass: override ``call``; ``requires``/``ensures`` check invariants
    (raise ``InvariantError``) and run only when contracts are checked."""

    name = "pass"

    def requires(self, state: CompileState) -> None:
        """Raise if the pass cannot run on ``state``."""

    def call(self, state: CompileState) -> PassResult:
        raise NotImplementedError("need call")

    def ensures(self, state: CompileState) -> None:
        """Raise if the pass left ``state`` inconsistent."""

    def __call__(self, state: CompileState) -> PassResult:
        if CHECK_CONTRACTS:
            self.requires(state)
        result = self.call(state)
        if CHECK_CONTRACTS:
            self.ensures(result.state)
        return result


class PassManager:
    """Runs passes in order; a failure is annotated with the pass and the ones before it.

    Errors the input causes (``GraphExecError``) pass through as they are; anything else
    is a bug and keeps its type (the CLI reports it as an internal error, exit 1)."""

    def __init__(self, passes: list[Pass]) -> None:
        self.passes = passes

    def run(self, state: CompileState) -> CompileState:
        done: list[str] = []
        timings: dict[str, float] = dict(state.timings)
        for p in self.passes:
            t0 = time.perf_counter()
            try:
                state = p(state).state
            except Exception as e:
                if not isinstance(e, GraphExecError):
                    e.add_note(f"in pass {p.name!r} after {done}")
                raise
            timings[p.name] = time.perf_counter() - t0
            log.debug("pass %s took %.3f s", p.name, timings[p.name])
            done.append(p.name)
        return replace(state, timings=MappingProxyType(timings))
