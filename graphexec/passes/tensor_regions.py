"""Which nodes one Megatron-style split covers, found backward from a row-parallel MatMul.

A row-parallel node (a MatMul/Gemm with a constant 2-D weight) sums over its input's last
axis: split that axis over ``n`` cards and each card computes a partial sum that one
all-reduce completes. Walking back from that input, every producer must be able to
compute its split output from split inputs; :func:`input_axes` says, for the split axis
of a node's output, which axis of each input must be split (None: the input is read
whole, broadcast over that axis). The walk ends at column-parallel nodes: MatMul/Gemm
with a constant 2-D weight whose output is split on its last axis (card r holds block r
of the weight's columns). On the way may lie elementwise ops (their constants sharded
along the axis), Transpose, reshapes (the axis mapped through the shape), MatMul between
split values along a batch axis and Softmax over another axis: attention's Q.K^T and P.V
per head, so an attention block splits by heads. A region stands only if nothing outside
it reads a value inside (nor is one a graph output) and every split axis divides by
``n``: then each card computes its block of every value in it and only the all-reduce
joins them.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

import numpy as np

from graphexec.ir import Graph, Node

ELEMENTWISE = {"Relu", "Gelu", "Sigmoid", "Tanh", "Erf", "Identity", "LeakyRelu", "Elu", "Selu", "Softplus",
               "Neg", "Abs", "Exp", "HardSigmoid", "HardSwish", "Dropout", "Add", "Mul", "Sub", "Div", "Pow",
               "Max", "Min", "Where", "Cast", "Sqrt", "Reciprocal", "Clip", "Equal", "Less", "Greater", "Not"}
RESHAPES = {"Reshape", "Flatten", "Squeeze", "Unsqueeze"}


@dataclass(frozen=True)
class Region:
    """One split: column-parallel ``seeds``, the ``nodes`` between (graph order) and the
    row-parallel ``end``; ``axes``: each split value's split axis; ``shards``: (node,
    input index) -> the axis a constant input is sharded along."""

    seeds: tuple[Node, ...]
    nodes: tuple[Node, ...]
    end: Node
    axes: dict[str, int]
    shards: dict[tuple[str, int], int]
    heads: int = 0    # the split axis's size at the first per-head op (0: a plain MatMul pair)


def matmul_weight(g: Graph, node: Node) -> tuple[np.ndarray, bool] | str:
    """(weight, transposed) of a MatMul/Gemm with a constant 2-D weight, or why not."""
    if node.op not in ("MatMul", "Gemm") or len(node.inputs) < 2:
        return "not a MatMul/Gemm"
    w = g.values[node.inputs[1]].const
    if w is None or w.ndim != 2:
        return "its weight is not a constant 2-D tensor"
    trans = False
    if node.op == "Gemm":
        a = node.attrs
        if float(a.get("alpha", 1.0)) != 1.0 or float(a.get("beta", 1.0)) != 1.0 or int(a.get("transA", 0)):
            return "Gemm with alpha, beta or transA other than the defaults"
        trans = bool(int(a.get("transB", 0)))
        if len(node.inputs) > 2 and node.inputs[2] and g.values[node.inputs[2]].const is None:
            return "its bias is not a constant"
    return w, trans


def columns(w: tuple[np.ndarray, bool]) -> int:
    """The output columns of a weight as ``matmul_weight`` returns it."""
    return int(w[0].shape[0] if w[1] else w[0].shape[1])


def shape(g: Graph, name: str) -> tuple[int, ...] | None:
    t = g.values[name].type
    return tuple(int(d) for d in t.shape) if t.is_static and t.shape is not None else None   # type: ignore[arg-type]


def _aligned(g: Graph, inputs: list[str], ax: int, rank: int) -> list[int | None] | str:
    """Broadcasting: the axis of each input that lines up with output axis ``ax``, or
    None where the input has no such axis or is 1 along it."""
    out: list[int | None] = []
    for i in inputs:
        s = shape(g, i) if i else ()
        if s is None:
            return f"{i!r} has no shape known before the run"
        a = ax - (rank - len(s))
        out.append(a if a >= 0 and s[a] != 1 else None)
    return out


def input_axes(g: Graph, node: Node, ax: int) -> list[int | None] | str:
    """For ``node``'s output split on axis ``ax``: the axis each input must be split on
    (None: read whole), or why the node cannot compute a split output."""
    out = shape(g, node.outputs[0])
    if out is None:
        return f"{node.outputs[0]!r} has no shape known before the run"
    r, op = len(out), node.op
    if op in ELEMENTWISE:
        return _aligned(g, node.inputs, ax, r)
    if op in ("Softmax", "LogSoftmax"):
        new = g.opsets.get("", 13) >= 13
        axis = int(node.attrs.get("axis", -1 if new else 1)) % r
        if (ax != axis) if new else (ax < axis):
            return [ax]
        return f"{node.name} ({op}) normalizes over the split axis"
    if op == "Transpose":
        perm = [int(p) for p in node.attrs.get("perm", range(r - 1, -1, -1))]
        return [perm[ax]]
    if op in RESHAPES:
        src = shape(g, node.inputs[0])
        if src is None:
            return f"{node.inputs[0]!r} has no shape known before the run"
        for a in range(len(src)):
            if src[a] > 1 and prod(src[:a]) == prod(out[:ax]) and prod(src[a:]) == prod(out[ax:]):
                return [a] + [None] * (len(node.inputs) - 1)
        return f"{node.name} ({op}) mixes the split axis with others"
    if op == "MatMul" and ax < r - 2:
        return _aligned(g, node.inputs[:2], ax, r)
    return f"{node.name} ({op}) reads the split columns"


def _is_seed(g: Graph, node: Node, value: str, ax: int) -> bool:
    s = shape(g, value)
    return (value == node.outputs[0] and not isinstance(matmul_weight(g, node), str)
            and s is not None and ax == len(s) - 1)


@dataclass
class _Walk:
    axes: dict[str, int]
    shards: dict[tuple[str, int], int]
    seeds: dict[str, Node]
    nodes: dict[str, Node]
    whole: list[str]


def _walk(g: Graph, end: Node, producers: dict[str, Node], taken: set[str]) -> _Walk | str:
    x = end.inputs[0]
    s = shape(g, x)
    if s is None:
        return f"{x!r} has no shape known before the run"
    w = _Walk({x: len(s) - 1}, {}, {}, {}, [])
    todo = [x]
    while todo:
        v = todo.pop()
        node = producers.get(v)
        if node is None:
            return f"{v!r} is a graph input: no column-parallel MatMul/Gemm splits it first"
        if node.name in taken:
            return f"{node.name} is already split with other nodes"
        if node.name in w.nodes or node.name in w.seeds:
            continue
        if _is_seed(g, node, v, w.axes[v]):
            w.seeds[node.name] = node
            w.whole.append(node.inputs[0])
            continue
        req = input_axes(g, node, w.axes[v])
        if isinstance(req, str):
            return req
        w.nodes[node.name] = node
        for k, (i, a) in enumerate(zip(node.inputs, req)):
            if not i or a is None:
                w.whole.extend([i] if i else [])
            elif g.values[i].const is not None:
                w.shards[(node.name, k)] = a
            elif i in w.axes:
                if w.axes[i] != a:
                    return f"{i!r} would be split along two axes"
            else:
                w.axes[i] = a
                todo.append(i)
    return w


def _check(g: Graph, w: _Walk, end: Node, n: int, readers: dict[str, list[Node]]) -> str:
    """Why the walked region cannot stand ("" if it can)."""
    inside = set(w.nodes) | {end.name}
    for v, a in w.axes.items():
        s = shape(g, v)
        if s is None:
            return f"{v!r} has no shape known before the run"
        if s[a] % n:
            return f"{v!r} is {s[a]} along the split axis {a}, which {n} cards do not divide"
        if v in g.outputs:
            return f"{v!r}, between the split and its all-reduce, is a graph output"
        for node in readers.get(v, []):
            if node.name not in inside:
                return f"{node.name} ({node.op}) reads {v!r}, which the split divides"
    for v in w.whole:
        if v in w.axes:
            return f"{v!r} is read whole by one node and split for another"
    return ""


def find_region(g: Graph, end: Node, n: int, producers: dict[str, Node], readers: dict[str, list[Node]],
                taken: set[str]) -> tuple[Region | None, str, list[Node]]:
    """The region that ends at row-parallel ``end`` (None and why not, if none), and the
    column-parallel nodes the walk reached either way."""
    w = _walk(g, end, producers, taken)
    if isinstance(w, str):
        return None, w, []
    seeds = sorted(w.seeds.values(), key=lambda node: g.nodes.index(node))
    why = _check(g, w, end, n, readers)
    if why:
        return None, why, seeds
    order = {node.name: i for i, node in enumerate(g.nodes)}
    nodes = tuple(sorted(w.nodes.values(), key=lambda node: order[node.name]))
    heads = next((_size(g, node.outputs[0], w.axes) for node in nodes if node.op in ("Softmax", "MatMul")), 0)
    return Region(tuple(seeds), nodes, end, w.axes, w.shards, heads), "", seeds


def _size(g: Graph, value: str, axes: dict[str, int]) -> int:
    s = shape(g, value)
    return s[axes[value]] if s is not None else 0
