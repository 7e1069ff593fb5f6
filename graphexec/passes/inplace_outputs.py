"""In-place outputs: an elementwise kernel writes its output over the input it consumes.

When nobody but an elementwise kernel reads its input ``x`` (no other task, no view of
it, not a graph input, output or constant) and the output has x's type, the output
takes x's bytes, as GE's in-place outputs and TVM's storage rewrite do: the pool needs
one buffer fewer, and a chain like Conv -> BatchNormalization -> Relu lives in one
buffer, which lets the engine fold the chain on the host (``engine/fusion.py``).
It is safe because these kernels read each element before they write it (numpy ufuncs
with ``out=`` on an input; a variadic Sum accumulates into ``out`` from its third input
on, so only its first two inputs may be overwritten) and x is dead afterwards.
"""

from __future__ import annotations

from typing import cast

import numpy as np

from graphexec.ir import Graph
from graphexec.plan.tasks import Task, TaskGraph

INPLACE_OPS = frozenset({"Relu", "LeakyRelu", "Sigmoid", "Tanh", "Clip", "Neg", "Abs", "Exp", "Log", "Sqrt",
                         "BatchNormalization", "Add", "Sub", "Mul", "Div", "Sum"})
_SOURCES = 2   # how many leading inputs may be overwritten
MAX_CHAIN = 16  # values in one buffer, at most: checks that walk a buffer's readers stay linear
_BROADCASTING = frozenset({"Add", "Sub", "Mul", "Div", "Sum"})   # output shape = the inputs' broadcast


def inplace_outputs(graph: Graph, tasks: TaskGraph) -> dict[str, str]:
    """{output: input whose bytes it reuses}, for the kernel tasks where that is safe.

    Runs after views and no-task Concats are aliased; a chain of in-place kernels makes
    a chain of aliases, which ``flatten_aliases`` points at its first value; a chain
    starts a new buffer after ``MAX_CHAIN`` values. ``tasks.alias`` is not changed.
    """
    alias = dict(tasks.alias)
    readers: dict[str, set[int]] = {}
    for t in tasks.tasks:
        for r in t.reads:
            if r:
                readers.setdefault(tasks.root(r), set()).add(t.id)
    barred = {tasks.root(o) for o in graph.outputs} | set(graph.inputs)
    made: dict[str, str] = {}
    depth: dict[str, int] = {}
    for t in tasks.tasks:
        y = t.writes[0] if len(t.writes) == 1 else None
        if t.node is None or t.node.domain or t.op not in INPLACE_OPS or y is None or y in alias:
            continue
        for x in t.node.inputs[:_SOURCES]:
            if x and depth.get(x, 1) < MAX_CHAIN and _reusable(graph, tasks, alias, t, x, y, readers, barred, made):
                made[y], depth[y] = x, depth.get(x, 1) + 1
                alias[y] = x
                break
    return made


def _reusable(graph: Graph, tasks: TaskGraph, alias: dict[str, str], task: Task, x: str, y: str,
              readers: dict[str, set[int]], barred: set[str], made: dict[str, str]) -> bool:
    """Whether ``task`` may write ``y`` over ``x``: x owns its bytes (or took them in place),
    only ``task`` reads them, once (no other input of it is a view or slice of them), and
    y has x's type, which the inputs' shapes confirm (a declared shape may be wrong)."""
    if (x in alias and x not in made) or x in barred:
        return False
    only = readers.get(x)
    if only is None or len(only) != 1 or task.id not in only:
        return False
    node = task.node
    assert node is not None  # the caller skips tasks without a node
    root = _root(alias, x)
    if node.inputs.count(x) != 1 or graph.values[x].const is not None \
            or any(r != x and _root(alias, r) == root for r in task.reads if r):
        return False
    tx, ty = graph.values[x].type, graph.values[y].type
    if not (tx.is_static and ty.is_static and tx.dtype == ty.dtype):
        return False
    assert tx.shape is not None and ty.shape is not None  # static types have shapes
    if tuple(tx.shape) != tuple(ty.shape):
        return False
    if task.op not in _BROADCASTING:
        return True
    shapes = [graph.values[n].type.shape for n in node.inputs if n]
    if any(s is None or not all(isinstance(d, int) for d in s) for s in shapes):
        return False
    int_shapes = cast("list[tuple[int, ...]]", shapes)  # every one known and all ints (checked above)
    want = tuple(tx.shape)
    if all(tuple(s) == want for s in int_shapes):   # equal shapes broadcast to themselves
        return True
    try:
        return np.broadcast_shapes(*(tuple(s) for s in int_shapes)) == want
    except ValueError:
        return False


def _root(alias: dict[str, str], name: str) -> str:
    """The value that owns ``name``'s bytes, with the in-place outputs chosen so far."""
    while name in alias:
        name = alias[name]
    return name
