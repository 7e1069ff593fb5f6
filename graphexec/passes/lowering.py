"""Lowering: every node becomes zero or one task.

Pure views (Reshape, Flatten, Squeeze, Unsqueeze, Identity) launch nothing: their
output aliases the input's bytes, which is safe because values are never written
twice. A Concat whose inputs can lie side by side launches nothing either (GE's
concat no-task): its producers write into their slices of its output. Every other node
becomes a kernel task with its cost, on the AI core when an own kernel serves it and on
the AI CPU when only the reference fallback does; an elementwise task whose input dies
with it writes over that input (``inplace.py``).
"""

from __future__ import annotations

import functools
from dataclasses import replace
from types import MappingProxyType

import numpy as np

from graphexec import _switch
from graphexec.errors import InvariantError
from graphexec.ir import Graph, Node
from graphexec.kernels.cost import Cost, cube_dtype, node_cost
from graphexec.kernels.dispatch import NodeRunner
from graphexec.kernels.fused import FusedRunner, fused_cost, is_fused, member_cost, value_shapes
from graphexec.passes.base import CompileState, Pass, PassResult
from graphexec.passes.concat_slices import no_task_concats, strided_concats
from graphexec.passes.contracts import check_tasks
from graphexec.passes.control_flow import runs_on_device
from graphexec.passes.inplace_outputs import inplace_outputs
from graphexec.plan.tasks import Runner, Task, TaskGraph, TaskKind, flatten_aliases

VIEW_OPS = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"}
_NONE: frozenset[int] = frozenset()   # the writers of a value no task writes


def _is_view(node: Node, graph: Graph) -> bool:
    if node.op not in VIEW_OPS or node.domain or not node.inputs or len(node.outputs) != 1:
        return False
    src, dst = graph.values[node.inputs[0]].type, graph.values[node.outputs[0]].type
    return (src.is_static and dst.is_static and src.dtype == dst.dtype and src.nbytes == dst.nbytes
            and node.outputs[0] not in graph.inputs)


def lower(graph: Graph, c0: int | None = None) -> tuple[TaskGraph, dict[int, Runner]]:
    """The task graph of ``graph`` and one NodeRunner per kernel task (by task id); ``c0``: the
    NC1HWC0 block of a chip that keeps activations in it (its channel Concats at any batch may
    launch nothing, ``strided_concats``)."""
    views = {n.outputs[0]: n.inputs[0] for n in graph.nodes if _is_view(n, graph)}
    slices = no_task_concats(graph, set(views))
    strided = strided_concats(graph, set(views), slices, c0) if c0 else {}
    slices.update({x: (y, off) for x, (y, off, _) in strided.items()})
    merged = {x for x, _ in slices.values()}
    alias, offset = dict(views), {}
    for x, (y, off) in slices.items():
        alias[x], offset[x] = y, off
    tasks: list[Task] = []
    deps: dict[int, set[int]] = {}
    runners: dict[int, Runner] = {}
    writers: dict[str, set[int]] = {}
    costs: dict[tuple, tuple[Cost, str]] = {}   # a standard op's cost and dtype by its types (``_kernel_task``)
    for node in graph.nodes:
        outs = [o for o in node.outputs if o]
        if node.outputs[0] in views:
            writers[outs[0]] = writers.get(node.inputs[0], set())
            continue
        if node.op == "Concat" and outs and outs[0] in merged:
            writers[outs[0]] = set().union(*(writers.get(x, set()) for x in node.inputs))
            continue
        tid = len(tasks)
        reads = node.all_inputs
        if is_fused(node):
            runners[tid] = FusedRunner(node, graph)
            tasks.append(_fused_task(tid, node, graph, reads, costs))
        else:
            runner = runners[tid] = NodeRunner(node, graph)
            tasks.append(_kernel_task(tid, node, graph, runner, reads, costs))
        deps[tid] = set().union(*(writers.get(r, _NONE) for r in reads))
        for o in outs:
            writers[o] = {tid}
    # the in-place pass looks up roots: keep each lookup one step
    tg = TaskGraph(tasks, deps, *flatten_aliases(alias, offset))
    inplace = inplace_outputs(graph, tg)
    return TaskGraph(tasks, deps, *flatten_aliases({**tg.alias, **inplace}, tg.offset), inplace,
                     {x: slot for x, (_, _, slot) in strided.items()}), runners


def _kernel_task(tid: int, node: Node, graph: Graph, runner: NodeRunner, reads: list[str],
                 costs: dict[tuple, tuple[Cost, str]]) -> Task:
    """The node's task. Its cost and compute dtype depend only on the op, the fallback, the
    attributes and the inputs' and outputs' types, so a standard op without attributes
    takes them from ``costs`` (keyed by the types' objects, which inference shares between
    values alike): a long graph repeats a few kinds of node."""
    outs = [o for o in node.outputs if o]
    key: tuple | None = None
    known = None
    if not node.domain and not node.attrs:
        values = graph.values
        key = (node.op, runner.uses_fallback, *[id(values[n].type) if n else 0 for n in node.inputs], -1,
               *[id(values[n].type) for n in outs])
        known = costs.get(key)
    if known is None:
        in_shapes, in_bytes = value_shapes(graph, node.inputs)
        out_shapes, out_bytes = value_shapes(graph, outs)
        cost = node_cost(node.op, in_shapes, in_bytes, out_shapes, out_bytes, node.attrs, runner.uses_fallback,
                         node.domain)
        known = (cost, _compute_dtype(graph, node, outs, cost.unit))
        if key is not None:
            costs[key] = known
    cost, dtype = known
    kind = TaskKind.AICPU if cost.unit == "aicpu" else TaskKind.KERNEL
    if runs_on_device(node, graph):   # its cost is the opaque estimate timing-only runs use
        kind = TaskKind.CONTROL
    return Task(tid, kind, node.name, node.op, tuple(dict.fromkeys(reads)), tuple(outs), cost.unit,
                cost.flops, cost.bytes, cost.block_dim, dtype, node, conv_groups(graph, node))


def conv_groups(graph: Graph, node: Node) -> tuple[int, ...]:
    """(groups, input and output channels per group) of a grouped Conv with a known weight
    shape; () otherwise (kernel_time pads these to the cube fractal where the profile says so)."""
    groups = node.attrs.get("group", 1)
    if node.op != "Conv" or node.domain or not isinstance(groups, int) or groups <= 1 or len(node.inputs) < 2:
        return ()
    w = graph.values[node.inputs[1]].type.shape if node.inputs[1] in graph.values else None
    cout, cin = (w[0], w[1]) if w and len(w) >= 2 else (None, None)
    if not isinstance(cout, int) or not isinstance(cin, int) or cin <= 0 or cout <= 0 or cout % groups:
        return ()
    return (groups, cin, cout // groups)


def _fused_task(tid: int, node: Node, graph: Graph, reads: list[str], costs: dict[tuple, tuple[Cost, str]]) -> Task:
    """A fused node's one task, priced as the fused kernel; its dtype is its head's."""
    cost = fused_cost(graph, node, lambda m: _member_cost(graph, m, costs))
    head = node.meta["members"][0]
    dtype = _compute_dtype(graph, head, [o for o in head.outputs if o], cost.unit)
    outs = tuple(o for o in node.outputs if o)
    return Task(tid, TaskKind.KERNEL, node.name, node.op, tuple(dict.fromkeys(reads)), outs, cost.unit,
                cost.flops, cost.bytes, cost.block_dim, dtype, node, conv_groups(graph, head))


def _member_cost(graph: Graph, node: Node, costs: dict[tuple, tuple[Cost, str]]) -> Cost:
    """A fused member's ``member_cost``, from ``costs`` under ``_kernel_task``'s key where it
    keys one (a standard op without attributes; a member runs its own kernel, no fallback):
    a long fused chain repeats a few kinds of member. ``GRAPHEXEC_PLAIN``: priced each time."""
    if node.domain or node.attrs or not _switch.FAST:
        return member_cost(graph, node)
    values = graph.values
    outs = [o for o in node.outputs if o]
    key = (node.op, False, *[id(values[n].type) if n else 0 for n in node.inputs], -1,
           *[id(values[n].type) for n in outs])
    known = costs.get(key)
    if known is None:
        cost = member_cost(graph, node)
        known = costs[key] = (cost, _compute_dtype(graph, node, outs, cost.unit))
    return known[0]


def _compute_dtype(graph: Graph, node: Node, outputs: list[str], unit: str) -> str:
    """The dtype that picks the task's peak rate: a cube op's operands' (``cube_dtype``: an
    int8 GEMM is int8 whatever its output), any other task's first output's."""
    if unit == "cube":
        ins = [graph.values[n].type.dtype if n else None for n in node.inputs]
        dtype = cube_dtype(node.op, [d.name if d is not None else None for d in ins], node.attrs)
        if dtype is not None:
            return dtype
    for n in outputs:
        t = graph.values[n].type
        if t.dtype is not None and t.dtype.kind in "fiub":
            return _name(t.dtype)
    return "float32"


@functools.lru_cache(maxsize=None)
def dtype_name(dtype: np.dtype) -> str:
    """``dtype.name``, which numpy works out in Python at every call; a graph has a few dtypes."""
    return dtype.name


_name = dtype_name


class Lowering(Pass):
    name = "lowering"

    def call(self, state: CompileState) -> PassResult:
        layout = state.profile.layout
        tasks, runners = lower(state.graph, layout.c0 if layout is not None and layout.strided_concat else None)
        return PassResult(replace(state, tasks=tasks, runners=MappingProxyType(runners)), True)

    def ensures(self, state: CompileState) -> None:
        tasks = state.need_tasks()
        check_tasks(tasks)
        if set(state.runners) != {t.id for t in tasks.tasks}:
            raise InvariantError("lowering left kernel tasks without a runner")
