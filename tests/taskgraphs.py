"""Tiny task graphs built directly, no model or lowering involved (tinygrad's ``b(i)``)."""

from __future__ import annotations

from graphexec.ir import Graph
from graphexec.plan import CompileOptions, Task, TaskGraph, TaskKind
from graphexec.passes.base import CompileState
from graphexec.runtime.profiles import load_profile


def b(i: int, reads: tuple[str, ...] = (), flops: float = 1e6) -> Task:
    """Kernel task ``i``: writes ``t{i}``, reads ``reads``."""
    return Task(i, TaskKind.KERNEL, f"k{i}", "Relu", reads, (f"t{i}",), "vector", flops, 4096.0, 4)


def dag(edges: dict[int, tuple[int, ...]], n: int | None = None) -> TaskGraph:
    """Tasks 0..n-1, task c reading the outputs of ``edges[c]``."""
    n = n if n is not None else max([*edges, *(p for ps in edges.values() for p in ps)]) + 1
    tasks = [b(i, tuple(f"t{p}" for p in edges.get(i, ()))) for i in range(n)]
    return TaskGraph(tasks, {i: set(edges.get(i, ())) for i in range(n)})


def state(tasks: TaskGraph, **options: object) -> CompileState:
    """A compile state that lowering would have left: an empty graph plus ``tasks``."""
    return CompileState(Graph("tiny"), CompileOptions(**options), load_profile("ascend910"), tasks=tasks)


DIAMOND = {1: (0,), 2: (0,), 3: (1, 2)}
