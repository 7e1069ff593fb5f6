"""Freeing a graph's batch dim, so that one graph takes any batch: data and pipeline
parallelism feed each card a share of the batch a user gives.

Exported models often declare a fixed batch (1) and bake it into Reshape targets
([1, -1] to flatten before a Gemm, [1, 4, 28, 56, 56] for a channel shuffle). Freeing
makes axis 0 of the batch inputs symbolic, does the same to every declared type whose
dim 0 is that batch, and rewrites each Reshape target whose first entry is the
declared batch, and which reshapes a tensor whose dim 0 is that batch at the declared
shapes, to 0 there (ONNX Reshape: 0 copies the input's dim). At the declared batch that
is the same reshape; at any other it follows the batch. Every other Reshape is left
alone: a graph that fixes its batch some other way fails to compile for another batch,
and the error names the node.
"""

from __future__ import annotations

import copy
from typing import Sequence

import numpy as np
import onnx

from graphexec.ir import Graph, Node, TensorType, Value
from graphexec.passes.shape_inference import infer_types

SYMBOL = "batch"


def free_batch(graph: Graph, inputs: Sequence[str] | None = None) -> Graph:
    """A copy of ``graph`` whose ``inputs`` (default: every tensor input of rank >= 1)
    take any size on axis 0; ``graph`` itself when none of them declares a fixed one."""
    names = [n for n in (graph.inputs if inputs is None else inputs) if _fixed_batch(graph.values[n].type) is not None]
    batches = {_fixed_batch(graph.values[n].type) for n in names}
    if not names:
        return graph
    at_declared = _inferred(graph)
    g = _copy(graph)
    for name in names:
        g.values[name].type = _symbolic(g.values[name].type)
    for v in g.values.values():
        if v.name not in names and v.const is None and _fixed_batch(v.type) in batches:
            v.type = _symbolic(v.type) if v.name in g.outputs else TensorType(v.type.dtype, None, v.type.kind)
    for node in g.nodes:
        if node.op == "Reshape" and _follows_batch(node, at_declared, batches):
            _target_copies_dim0(g, node)
    return g


def _fixed_batch(t: TensorType) -> int | None:
    if t.kind != "tensor" or not t.shape or not isinstance(t.shape[0], int):
        return None
    return t.shape[0]


def _symbolic(t: TensorType) -> TensorType:
    assert t.shape is not None
    return TensorType(t.dtype, (SYMBOL, *t.shape[1:]), t.kind)


def _copy(graph: Graph) -> Graph:
    """Nodes and values of their own (constants shared), as the session's clone makes them."""
    g = copy.copy(graph)
    g.nodes = [copy.copy(n) for n in graph.nodes]
    for n in g.nodes:
        n.inputs, n.meta = list(n.inputs), dict(n.meta)
    g.values = {k: copy.copy(v) for k, v in graph.values.items()}
    g.meta = dict(graph.meta)
    return g


def _inferred(graph: Graph) -> Graph:
    """The graph's types at its declared input shapes (inference only: nothing folded)."""
    g = _copy(graph)
    infer_types(g)
    return g


def _target(g: Graph, node: Node) -> np.ndarray | None:
    if len(node.inputs) < 2 or not node.inputs[1]:
        return None
    c = g.values[node.inputs[1]].const
    return c if isinstance(c, np.ndarray) and c.ndim == 1 and c.size and c.dtype.kind == "i" else None


def _follows_batch(node: Node, at_declared: Graph, batches: set[int | None]) -> bool:
    """A Reshape whose target starts with the declared batch, of a tensor whose dim 0 is
    that batch at the declared shapes."""
    target = _target(at_declared, node)
    if target is None or node.attrs.get("allowzero", 0) or int(target[0]) not in batches:
        return False
    return _fixed_batch(at_declared.values[node.inputs[0]].type) == int(target[0])


def _target_copies_dim0(g: Graph, node: Node) -> None:
    """Point the Reshape at a copy of its target with 0 first (its own constant: another
    node may share the old one)."""
    target = _target(g, node)
    assert target is not None
    new = target.copy()
    new[0] = 0
    name = f"{node.inputs[1]}/{node.name}/free_batch"
    g.values[name] = Value(name, TensorType(new.dtype, new.shape), new)
    node.inputs[1] = name
    if node.proto is not None:   # shape inference and the fallback read the proto
        proto = onnx.NodeProto()
        proto.CopyFrom(node.proto)
        proto.input[1] = name
        node.proto = proto
