"""Lowering: every node becomes zero or one task.

Pure views (Reshape, Flatten, Squeeze, Unsqueeze, Identity) launch nothing: their
output aliases the input's bytes, which is safe because values are never written
twice. Every other node becomes a kernel task with its cost, on the AI core when an
own kernel serves it and on the AI CPU when only the reference fallback does.
"""

from __future__ import annotations

from graphexec.ir import Graph, Node
from graphexec.kernels.cost import node_cost
from graphexec.kernels.dispatch import NodeRunner
from graphexec.passes.base import CompileState, Pass, PassResult
from graphexec.passes.tasks import Task, TaskGraph, TaskKind

VIEW_OPS = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"}


def _is_view(node: Node, graph: Graph) -> bool:
    if node.op not in VIEW_OPS or node.domain or not node.inputs or len(node.outputs) != 1:
        return False
    src, dst = graph.values[node.inputs[0]].type, graph.values[node.outputs[0]].type
    return (src.is_static and dst.is_static and src.dtype == dst.dtype and src.nbytes == dst.nbytes
            and node.outputs[0] not in graph.inputs)


def _shapes(graph: Graph, names: list[str]) -> tuple[list, int]:
    shapes, total = [], 0
    for n in names:
        t = graph.values[n].type if n else None
        shapes.append(t.shape if t is not None and t.is_static else None)
        total += t.nbytes if t is not None and t.is_static else 0
    return shapes, total


def lower(graph: Graph, runners: dict[str, NodeRunner]) -> TaskGraph:
    """The task graph of ``graph``; ``runners`` gets one NodeRunner per kernel node."""
    tasks: list[Task] = []
    alias: dict[str, str] = {}
    writer: dict[str, int] = {}
    deps: dict[int, set[int]] = {}
    for node in graph.nodes:
        if _is_view(node, graph):
            alias[node.outputs[0]] = node.inputs[0]
            continue
        runner = runners[node.name] = NodeRunner(node, graph)
        in_shapes, in_bytes = _shapes(graph, node.inputs)
        outs = [o for o in node.outputs if o]
        out_shapes, out_bytes = _shapes(graph, outs)
        cost = node_cost(node.op, in_shapes, in_bytes, out_shapes, out_bytes, node.attrs, runner.uses_fallback)
        tid = len(tasks)
        reads = list(dict.fromkeys(_root(alias, n) for n in node.all_inputs))
        kind = TaskKind.AICPU if cost.unit == "aicpu" else TaskKind.KERNEL
        tasks.append(Task(tid, kind, node.name, node.op, reads, outs, cost.unit, cost.flops, cost.bytes,
                          cost.block_dim, _compute_dtype(graph, outs), runner, node))
        deps[tid] = {writer[r] for r in reads if r in writer}
        for o in outs:
            writer[o] = tid
    return TaskGraph(tasks, deps, alias)


def _compute_dtype(graph: Graph, outputs: list[str]) -> str:
    for n in outputs:
        t = graph.values[n].type
        if t.dtype is not None and t.dtype.kind in "fiub":
            return t.dtype.name
    return "float32"


def _root(alias: dict[str, str], name: str) -> str:
    while name in alias:
        name = alias[name]
    return name


class Lowering(Pass):
    name = "lowering"

    def call(self, state: CompileState) -> PassResult:
        state.tasks = lower(state.graph, state.runners)
        return PassResult(state, True)
