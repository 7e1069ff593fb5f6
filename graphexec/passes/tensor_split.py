"""Megatron-style tensor splits of a typed graph over ``n`` cards, and its segments.

:func:`split_graph` finds the regions of ``passes/tensor_regions.py``: column-parallel
MatMul/Gemm (card r holds the weight's columns ``r*H/n:(r+1)*H/n``), then what lies
between (each card computes its block of every value: a bias shard, an activation, whole
attention heads), then a row-parallel MatMul/Gemm (rows of the same block) whose partial
sum one all-reduce (sum) over the cards completes; a Gemm's bias is added once, after the
all-reduce. A Conv (group 1) with constant weights splits by output channels: card r
computes channel block r, an all-gather stacks the blocks ([n, B, C/n, ...]) and a
Transpose + Reshape puts them back as [B, C, ...] (their ranks are the collective's
result, so every card has the whole output after it). Everything else is replicated:
every card computes it identically. A candidate the shapes do not allow (columns, heads
or channels that ``n`` does not divide, no partner, a reader of the split values outside
the region, a grouped Conv, shapes unknown before the run), or one whose collective
would cost more than the compute it spreads (``worth``), stays replicated and the report
says why.

:func:`segments` cuts a card's graph at the collectives: segment k holds what collective
k's input needs that no earlier segment computes, the last one the rest; each segment is
a graph of its own (inputs: graph inputs, collective results, other segments' values).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Callable, cast

import numpy as np

from graphexec.ir import Graph, Node, TensorType
from graphexec.passes.tensor_regions import Region, columns, find_region, input_axes, matmul_weight
from graphexec.passes.tensor_regions import shape as value_shape

Worth = Callable[[list[str], str, int], str]   # (nodes, collective kind, bytes) -> why not ("" if worth it)


@dataclass(frozen=True)
class Collective:
    """A collective over the cards: "all_reduce" (sum) of ``src`` into ``dst``, or "all_gather"
    (``dst`` = every card's ``src`` stacked on a new leading axis in card order)."""

    kind: str
    src: str
    dst: str


@dataclass
class Split:
    """The per-card graphs, the collectives between their parts, and the report."""

    cards: list[Graph]
    collectives: list[Collective]
    report: dict[str, Any] = field(default_factory=dict)


def _weight(g: Graph, node: Node) -> tuple[np.ndarray, bool]:
    w = matmul_weight(g, node)
    assert not isinstance(w, str), w
    return w


def _conv_ok(g: Graph, node: Node, n: int) -> str:
    """Why Conv ``node`` cannot split by output channels over ``n`` cards ("" if it can)."""
    w = g.values[node.inputs[1]].const
    if w is None or w.ndim < 3:
        return "its weight is not a constant tensor"
    if int(node.attrs.get("group", 1)) != 1:
        return "a grouped Conv"
    if w.shape[0] % n:
        return f"its {w.shape[0]} output channels do not split over {n} cards"
    if len(node.inputs) > 2 and node.inputs[2] and g.values[node.inputs[2]].const is None:
        return "its bias is not a constant"
    t = g.values[node.outputs[0]].type
    if not t.is_static or not t.shape or t.shape[1] != w.shape[0]:
        return f"its output has shape {t}, not known before the run"
    return ""


def _shard(arr: np.ndarray, axis: int, r: int, n: int) -> np.ndarray:
    step = arr.shape[axis] // n
    return np.ascontiguousarray(np.take(arr, range(r * step, (r + 1) * step), axis=axis))


def _forward_reason(g: Graph, node: Node, n: int, readers: dict[str, list[Node]]) -> str:
    """Why nothing takes a column-parallel candidate's split output to a partner."""
    axes = {node.outputs[0]: len(value_shape(g, node.outputs[0]) or (0,)) - 1}
    todo = [node.outputs[0]]
    while todo:
        v = todo.pop(0)
        if v in g.outputs:
            return f"{v!r} is a graph output before any row-parallel MatMul/Gemm"
        for c in readers.get(v, []):
            if not isinstance(matmul_weight(g, c), str) and c.inputs[0] == v:
                return f"its partner {c.name} cannot take the split"
            out = value_shape(g, c.outputs[0])
            fwd = next((ax for ax in range(len(out or ())) if not isinstance(req := input_axes(g, c, ax), str)
                        and any(i == v and a == axes[v] for i, a in zip(c.inputs, req))), None)
            if fwd is None:
                return f"{c.name} ({c.op}) reads the split columns"
            if c.outputs[0] not in axes:
                axes[c.outputs[0]] = fwd
                todo.append(c.outputs[0])
    return "no MatMul/Gemm with a constant weight reads its output"


def split_graph(g: Graph, n: int, worth: Worth | None = None) -> Split:
    """The per-card graphs of typed graph ``g`` over ``n`` cards (see the module doc)."""
    producers = {o: node for node in g.nodes for o in node.outputs if o}
    readers: dict[str, list[Node]] = {}
    for node in g.nodes:
        for i in dict.fromkeys(node.all_inputs):
            readers.setdefault(i, []).append(node)
    taken: set[str] = set()
    regions: list[Region] = []
    seen_by: dict[str, str] = {}   # candidate -> why the region that reached it failed
    for end in g.nodes:
        if end.name in taken or isinstance(matmul_weight(g, end), str):
            continue
        region, why, seeds = find_region(g, end, n, producers, readers, taken)
        if region is not None and worth is not None:
            why = worth([x.name for x in (*region.seeds, *region.nodes, region.end)], "all_reduce",
                        g.values[end.outputs[0]].type.nbytes)
        if region is None or why:
            seen_by.update((s.name, f"with {end.name}: {why}") for s in seeds if s.name not in seen_by)
            if seeds:   # it ended a region that failed: that says more than what reads its output
                seen_by.setdefault(end.name, why)
            continue
        regions.append(region)
        taken.update(x.name for x in (*region.seeds, *region.nodes, region.end))
    split, replicated, convs = [], [], []
    for node in g.nodes:
        if node.name in taken or node.op not in ("MatMul", "Gemm", "Conv"):
            continue
        why = _replicated_reason(g, node, n, seen_by, readers)
        if node.op == "Conv" and not why and worth is not None:
            why = worth([node.name], "all_gather", g.values[node.outputs[0]].type.nbytes)
        if why:
            replicated.append({"node": node.name, "op": node.op, "reason": why})
        else:
            convs.append(node)
            split.append({"nodes": [node.name], "kind": "output channels", "collective": "all_gather",
                          "value": node.outputs[0],
                          "channels": int(cast(np.ndarray, g.values[node.inputs[1]].const).shape[0])})
    split[:0] = [_entry(g, reg) for reg in regions]
    report = {"split": split, "replicated": replicated, "replicated_nodes": len(g.nodes) - len(convs) - len(taken)}
    cards: list[Graph] = []
    colls: list[Collective] = []
    for r in range(n):
        card, colls = _rewrite(g, regions, convs, r, n)
        cards.append(card)
    return Split(cards, colls, report)


def _replicated_reason(g: Graph, node: Node, n: int, seen_by: dict[str, str], readers: dict[str, list[Node]]
                       ) -> str:
    """Why a MatMul/Gemm stays replicated, or why a Conv must ("" if it splits)."""
    if node.op == "Conv":
        return _conv_ok(g, node, n)
    w = matmul_weight(g, node)
    if isinstance(w, str):
        return w
    if columns(w) % n:
        return f"its {columns(w)} output columns do not split over {n} cards"
    return seen_by.get(node.name) or _forward_reason(g, node, n, readers)


def _entry(g: Graph, reg: Region) -> dict[str, Any]:
    x = reg.end.inputs[0]
    entry: dict[str, Any] = {"nodes": [s.name for s in reg.seeds] + [reg.end.name],
                             "kind": "attention heads" if reg.heads else "column+row parallel",
                             "collective": "all_reduce", "value": reg.end.outputs[0],
                             "columns": int(cast(tuple, g.values[x].type.shape)[-1])}
    if reg.heads:
        entry["heads"] = reg.heads
    return entry


def _rewrite(g: Graph, regions: list[Region], convs: list[Node], r: int, n: int) -> tuple[Graph, list[Collective]]:
    """Card ``r``'s graph: sharded weights, block-sized values, partial sums and collectives."""
    out = copy.copy(g)
    out.values = {k: copy.copy(v) for k, v in g.values.items()}
    out.meta = dict(g.meta)
    nodes = {node.name: copy.copy(node) for node in g.nodes}
    extra: dict[str, list[Node]] = {}
    colls: list[Collective] = []

    def const(node: Node, k: int, arr: np.ndarray, name: str | None = None) -> None:
        name = name or f"{node.inputs[k]}__tp{r}of{n}"
        if name not in out.values:
            v = out.value(name)
            v.const, v.type = arr, TensorType(arr.dtype, tuple(arr.shape))
        node.inputs = list(node.inputs)
        node.inputs[k] = name

    for reg in regions:
        _rewrite_region(g, out, nodes, reg, const, r, n)
        extra.update(_all_reduce(g, out, nodes[reg.end.name], reg.end, colls))
    for conv in convs:
        extra[conv.name] = _conv(g, out, nodes[conv.name], conv, const, colls, r, n)
    out.nodes = []
    for node in g.nodes:
        out.nodes.append(nodes[node.name])
        out.nodes.extend(extra.get(node.name, []))
    return out, colls


def _rewrite_region(g: Graph, out: Graph, nodes: dict[str, Node], reg: Region, const: Callable[..., None],
                    r: int, n: int) -> None:
    """Shard a region's weights and constants, and give its values their block's shape."""
    for seed in reg.seeds:
        ns = nodes[seed.name]
        w, trans = _weight(g, seed)
        const(ns, 1, _shard(w, 0 if trans else 1, r, n))
        c = g.values[seed.inputs[2]].const if seed.op == "Gemm" and len(seed.inputs) > 2 and seed.inputs[2] else None
        if c is not None and c.size > 1:
            const(ns, 2, _shard(c.reshape(-1), 0, r, n))
    for (name, k), axis in reg.shards.items():
        c = cast(np.ndarray, g.values[nodes[name].inputs[k]].const)
        const(nodes[name], k, _shard(c, axis, r, n))
    for v, axis in reg.axes.items():
        t = g.values[v].type
        dims = [cast(int, d) for d in cast(tuple, t.shape)]
        dims[axis] //= n
        out.values[v].type = TensorType(t.dtype, tuple(dims))
    for node in reg.nodes:
        if node.op == "Reshape":   # the block's shape, spelled out (0 and -1 would read the whole one)
            block = cast(tuple, out.values[node.outputs[0]].type.shape)
            const(nodes[node.name], 1, np.array(block, np.int64), f"{node.name}__tp_shape")
    w, trans = _weight(g, reg.end)
    const(nodes[reg.end.name], 1, _shard(w, 1 if trans else 0, r, n))


def _all_reduce(g: Graph, out: Graph, nb: Node, b: Node, colls: list[Collective]) -> dict[str, list[Node]]:
    """The row-parallel node's partial sum, the all-reduce, and the bias after it."""
    y = b.outputs[0]
    partial, total = f"{y}__partial", y
    bias = b.inputs[2] if b.op == "Gemm" and len(b.inputs) > 2 and b.inputs[2] else None
    nb.inputs = nb.inputs[:2]
    nb.outputs = [partial]
    out.value(partial).type = g.values[y].type
    extra: dict[str, list[Node]] = {}
    if bias is not None or y in g.outputs:
        total = f"{y}__sum"
        out.value(total).type = g.values[y].type
        after = Node(f"{b.name}__tp_bias" if bias else f"{b.name}__tp_out", "Add" if bias else "Identity",
                     [total, bias] if bias else [total], [y])
        extra[b.name] = [after]
    colls.append(Collective("all_reduce", partial, total))
    return extra


def _conv(g: Graph, out: Graph, nc: Node, conv: Node, const: Callable[..., None], colls: list[Collective],
          r: int, n: int) -> list[Node]:
    """A Conv's channel block, the all-gather, and the Transpose + Reshape back to [B, C, ...]."""
    const(nc, 1, _shard(cast(np.ndarray, g.values[conv.inputs[1]].const), 0, r, n))
    if len(conv.inputs) > 2 and conv.inputs[2]:
        const(nc, 2, _shard(cast(np.ndarray, g.values[conv.inputs[2]].const), 0, r, n))
    y = conv.outputs[0]
    t = g.values[y].type
    assert t.shape is not None
    batch, chans, *rest = (cast(int, d) for d in t.shape)   # static (``_conv_ok``)
    part, gathered = f"{y}__part", f"{y}__gathered"
    nc.outputs = [part]
    out.value(part).type = TensorType(t.dtype, (batch, chans // n, *rest))
    out.value(gathered).type = TensorType(t.dtype, (n, batch, chans // n, *rest))
    colls.append(Collective("all_gather", part, gathered))
    shape = out.value(f"{y}__shape")
    shape.const = np.array(t.shape, np.int64)
    shape.type = TensorType(np.dtype(np.int64), (len(t.shape),))
    src = gathered
    join: list[Node] = []
    if batch != 1:   # [n, B, C/n, ...] -> [B, n, C/n, ...]: the channels of card r are block r
        src = f"{y}__moved"
        out.value(src).type = TensorType(t.dtype, (batch, n, chans // n, *rest))
        join.append(Node(f"{conv.name}__tp_move", "Transpose", [gathered], [src],
                         {"perm": [1, 0, *range(2, len(t.shape) + 1)]}))
    join.append(Node(f"{conv.name}__tp_join", "Reshape", [src, f"{y}__shape"], [y]))
    return join


@dataclass
class Segment:
    """One part of a card's graph: its graph, and where each of its inputs comes from."""

    graph: Graph
    from_feeds: list[str]
    from_collective: list[str]
    from_segment: dict[str, int]            # value -> the segment that computes it


def segments(g: Graph, colls: list[Collective]) -> list[Segment]:
    """``g`` cut at the collectives (see the module doc), in launch order."""
    prod = g.producers()
    order = {node.name: i for i, node in enumerate(g.nodes)}
    dsts = {c.dst for c in colls}
    where: dict[str, int] = {}
    groups: list[list[Node]] = []
    for c in sorted(colls, key=lambda c: order[prod[c.src].name]):
        cone: dict[str, Node] = {}
        stack = [c.src]
        while stack:
            v = stack.pop()
            node = prod.get(v)
            if node is None or node.name in cone or node.name in where:
                continue
            cone[node.name] = node
            stack.extend(i for i in node.all_inputs if i)
        where.update((name, len(groups)) for name in cone)
        groups.append(sorted(cone.values(), key=lambda node: order[node.name]))
    rest = [node for node in g.nodes if node.name not in where]
    if rest:
        where.update((node.name, len(groups)) for node in rest)
        groups.append(rest)
    made_in = {o: where[node.name] for node in g.nodes for o in node.outputs if o}
    needed: dict[int, set[str]] = {}
    for k, nodes in enumerate(groups):
        for node in nodes:
            for i in node.all_inputs:
                if i and i in made_in and made_in[i] != k:
                    needed.setdefault(made_in[i], set()).add(i)
    srcs = {c.src for c in colls}
    out: list[Segment] = []
    for k, nodes in enumerate(groups):
        seg = Graph(f"{g.name}__seg{k}", opsets=dict(g.opsets), functions=g.functions, source=g.source)
        seg.nodes = nodes
        reads = dict.fromkeys(i for node in nodes for i in node.all_inputs if i)
        made = {o for node in nodes for o in node.outputs if o}
        for name in list(reads) + sorted(made):
            seg.values[name] = g.values[name]
        seg.inputs = [i for i in reads if i not in made and g.values[i].const is None]
        seg.outputs = [o for node in nodes for o in node.outputs
                       if o and (o in g.outputs or o in srcs or o in needed.get(k, ()))]
        out.append(Segment(seg, [i for i in seg.inputs if i in g.inputs],
                           [i for i in seg.inputs if i in dsts],
                           {i: made_in[i] for i in seg.inputs if i in made_in}))
    return out
