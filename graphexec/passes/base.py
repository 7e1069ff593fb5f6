"""One pass contract: ``Pass.call(state) -> PassResult``, run in order by a PassManager.

The state a pass sees is a :class:`CompileState`: the graph being compiled plus the
products of earlier passes (task graph, schedule, memory plan) in typed fields.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

from graphexec.errors import GraphExecError, PassError
from graphexec.ir import Graph

log = logging.getLogger(__name__)


@dataclass
class CompileState:
    """Everything compilation knows so far; passes fill the later fields."""

    graph: Graph
    options: Any = None
    profile: Any = None
    runners: dict[str, Any] = field(default_factory=dict)
    tasks: Any = None
    schedule: Any = None
    memory_plan: Any = None
    timings: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class PassResult:
    state: CompileState
    modified: bool


class Pass:
    """Base of every pass: override ``call``; ``requires``/``ensures`` check invariants."""

    name = "pass"

    def requires(self, state: CompileState) -> None:
        """Raise if the pass cannot run on ``state``."""

    def call(self, state: CompileState) -> PassResult:
        raise NotImplementedError("need call")

    def ensures(self, state: CompileState) -> None:
        """Raise if the pass left ``state`` inconsistent."""

    def __call__(self, state: CompileState) -> PassResult:
        self.requires(state)
        result = self.call(state)
        self.ensures(result.state)
        return result


class PassManager:
    """Runs passes in order; a failure names the pass and the ones before it."""

    def __init__(self, passes: list[Pass]) -> None:
        self.passes = passes

    def run(self, state: CompileState) -> CompileState:
        done: list[str] = []
        for p in self.passes:
            t0 = time.perf_counter()
            try:
                state = p(state).state
            except GraphExecError:
                raise
            except Exception as e:
                raise PassError(f"{type(e).__name__} in pass {p.name!r} after {done}: {e}") from e
            state.timings[p.name] = time.perf_counter() - t0
            log.debug("pass %s took %.3f s", p.name, state.timings[p.name])
            done.append(p.name)
        return state
