"""The compiled graph as an ONNX file to look at (``Session.save_graph``, ``graphexec plan
--save-graph``), the way onnxruntime's ``optimized_model_filepath`` writes what it will run:
one node per kernel task of the schedule, after lowering and fusion. A fused task is one
node of domain ``graphexec.fused`` whose op type joins its members (``Conv+Relu``); every
node's doc string says the stream it runs on, its unit and its block count; views
that launch nothing are not nodes (their tensors are the bytes of the tensor they alias),
so the file shows what runs, and is not meant to be run itself."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from graphexec.plan.tasks import TaskKind

FUSED_DOMAIN = "graphexec.fused"


def _ordered(items: list[Any]) -> list[Any]:
    """``items`` (nodes) in an order where each comes after the nodes whose outputs it reads."""
    writer = {w: i for i, n in enumerate(items) for w in n.output}
    done: set[int] = set()
    out: list[Any] = []
    todo = dict(enumerate(items))
    while todo:
        ready = [i for i, n in todo.items() if all(writer.get(r) in done or writer.get(r) in (None, i)
                                                    for r in n.input)]
        for i in ready or [min(todo)]:   # a cycle cannot happen; be total anyway
            out.append(todo.pop(i))
            done.add(i)
    return out


def _task_node(t: Any, stream: int) -> Any:
    from onnx import helper

    fused = list(t.node.meta.get("fused_ops") or ()) if t.node is not None else []
    where = f"stream {stream}, {t.unit}, {int(t.block_dim)} blocks"
    if fused:
        return helper.make_node("+".join(fused), list(t.reads), list(t.writes), t.name, where, FUSED_DOMAIN,
                                stream=stream, unit=t.unit, block_dim=int(t.block_dim))
    ins, outs = (t.node.inputs, t.node.outputs) if t.node is not None else (t.reads, t.writes)   # x*x reads x once
    node = helper.make_node(t.op, list(ins), list(outs), t.name, where,   # a standard op keeps its own
                            t.node.domain if t.node is not None else "")   # attributes: onnx's checker takes it
    if t.node is not None and t.node.proto is not None:
        node.attribute.extend(t.node.proto.attribute)
    return node


def _views(compiled: Any, nodes: list[Any], have: set[str], wanted: list[str]) -> list[Any]:
    """The graph nodes that write what the tasks read (or the graph outputs) and no task
    writes: views, a Concat whose inputs were written in place (no task: the bytes of the
    tensor they alias), each as its ONNX op, until every read is written."""
    from onnx import helper

    producers = compiled.graph.producers()
    alias = compiled.plan.tasks.alias
    out: list[Any] = []
    todo = [r for n in nodes for r in n.input if r and r not in have] + [o for o in wanted if o not in have]
    while todo:
        name = todo.pop()
        node = producers.get(name)
        if name in have or node is None:
            continue
        view = helper.make_node(node.op, list(node.inputs), [o for o in node.outputs], node.name,
                                f"no task: a view of {alias.get(name, name)}'s bytes", node.domain)
        if node.proto is not None:
            view.attribute.extend(node.proto.attribute)
        out.append(view)
        have.update(node.outputs)
        todo += [i for i in node.inputs if i and i not in have]
    return out


def lowered_model(compiled: Any) -> Any:
    """An ``onnx.ModelProto`` of ``compiled``'s kernel tasks (see the module docstring)."""
    from onnx import TensorProto, helper, numpy_helper

    graph = compiled.graph
    stream = {t.id: i for i, ts in enumerate(compiled.schedule.streams) for t in ts}
    kernels = [t for ts in compiled.schedule.streams for t in ts if t.kind in (TaskKind.KERNEL, TaskKind.AICPU)]
    nodes = [_task_node(t, stream[t.id]) for t in kernels]
    consts = {name: np.asarray(v.const) for name, v in graph.values.items() if v.const is not None}
    have = set(graph.inputs) | set(consts) | {w for t in kernels for w in t.writes}
    nodes += _views(compiled, nodes, have, list(graph.outputs))
    read = {r for n in nodes for r in n.input}
    inits = [numpy_helper.from_array(a, name) for name, a in consts.items() if name in read and a.dtype != object]

    def info(name: str) -> Any:
        t = graph.values[name].type if name in graph.values else None
        if t is None or t.dtype is None or t.kind != "tensor":
            return helper.make_tensor_value_info(name, TensorProto.UNDEFINED, None)
        return helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(np.dtype(t.dtype)), t.shape)

    g = helper.make_graph(_ordered(nodes), f"{graph.name or 'graph'} (compiled)", [info(n) for n in graph.inputs],
                          [info(n) for n in graph.outputs], inits)
    g.doc_string = (f"graphexec: {len(kernels)} kernel tasks on {len(compiled.schedule.streams)} stream(s), "
                    f"policy {compiled.schedule.policy}, {compiled.schedule.num_events} event wait(s)")
    opsets = [helper.make_opsetid(d, v) for d, v in graph.opsets.items()] + [helper.make_opsetid(FUSED_DOMAIN, 1)]
    return helper.make_model(g, opset_imports=opsets, producer_name="graphexec")


def save_lowered(compiled: Any, path: str | Path) -> Path:
    """Write :func:`lowered_model` to ``path`` (.onnx)."""
    import onnx

    from graphexec.errors import GraphExecError

    target = Path(path)
    if target.suffix != ".onnx":
        raise GraphExecError(f"{path}: the compiled graph is written as .onnx")
    onnx.save(lowered_model(compiled), str(target))
    return target
