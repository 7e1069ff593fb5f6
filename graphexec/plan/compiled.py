"""The product of compilation as one frozen value: what the passes' state holds once
every pass has run, and the records some passes make for the executor.

A ``Plan`` belongs to no device: the executor loads it onto one (``engine/compiled.py``
allocates, uploads the weights, primes the views), several cards load the same plan, and
profiling reads it (tasks, schedule, memory plan, bounds) without the engine.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from graphexec.ir import Graph
from graphexec.plan.memory import MemoryPlan
from graphexec.plan.options import CompileOptions
from graphexec.plan.schedule import Schedule
from graphexec.plan.tasks import Runner, TaskGraph


@dataclass(frozen=True)
class Bounds:
    """What no schedule on the device can beat: max(critical path, core-time / cores,
    bytes / HBM bandwidth), and the critical path alone (microseconds)."""

    lower_bound_us: float
    critical_path_us: float


@dataclass(frozen=True)
class ThreadPlan:
    """What a compiled plan needs to run its kernels on threads: who may, and who waits for whom."""

    index: dict[int, int]              # task id -> launch index among kernels
    needs: dict[int, int]              # task id -> number of producers (eligible tasks only)
    consumers: dict[int, list[int]]    # task id -> eligible tasks reading what it writes


@dataclass(frozen=True, eq=False)
class Plan:
    """A graph compiled for one input signature on one device profile.

    ``profile`` is the ``runtime.profiles.DeviceProfile`` the costs came from (typed
    loosely: the plan sits below the runtime). ``runners`` maps a kernel task's id to what
    computes its outputs; ``direct`` the ids of tasks computing straight into their output
    bytes; ``fused`` counts tasks whose math their chain's head does; ``threads`` is set
    only for more than one host thread; ``timings`` each pass's host seconds; ``bodies``
    each control task's bodies (``BodyPlan``), compiled with the plan.
    """

    graph: Graph
    options: CompileOptions
    profile: Any
    tasks: TaskGraph
    schedule: Schedule
    memory_plan: MemoryPlan
    bounds: Bounds
    runners: Mapping[int, Runner]
    fused: int
    direct: frozenset[int]
    threads: ThreadPlan | None
    timings: Mapping[str, float]
    bodies: Mapping[int, tuple["BodyPlan", ...]] = field(default_factory=dict)


@dataclass(frozen=True, eq=False)
class BodyPlan:
    """One body of a control task (an If branch, a Loop or Scan body), made a graph of its
    own at compile time, and its plans by input signature: those the enclosing plan's
    types fix, compiled with it. A signature seen only at run time (a loop-carried value
    whose shape changes) is compiled then, from ``graph`` and ``options``.

    ``formal`` are the body's own inputs; ``outside`` the enclosing names it reads in
    place; ``label`` its trace prefix ("If_0/then_branch/")."""

    graph: Graph
    label: str
    formal: tuple[str, ...]
    outside: tuple[str, ...]
    options: CompileOptions
    plans: Mapping[tuple[Any, ...], Plan]
