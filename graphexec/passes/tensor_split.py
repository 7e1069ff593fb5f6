"""Megatron-style tensor splits of a typed graph over ``n`` cards, and its segments.

:func:`split_graph` finds, in a graph whose value types are known, each MatMul/Gemm with
a constant 2-D weight whose output reaches another MatMul/Gemm with a constant weight
only through elementwise ops (Relu, Gelu, bias Adds, ...): the first becomes
column-parallel (card r holds the weight's columns ``r*H/n:(r+1)*H/n`` and the matching
shard of every bias on the way), the second row-parallel (rows of the same shard), and
its output a partial sum that one all-reduce (sum) over the cards completes; a Gemm's
bias is added once, after the all-reduce. A Conv (group 1) with constant weights splits
by output channels: card r computes channel block r, an all-gather stacks the blocks
([n, B, C/n, ...]) and a Transpose + Reshape puts them back as [B, C, ...] (their ranks
are the collective's result, so every card has the whole output after it).
Everything else is replicated: every card
computes it identically. A candidate the shapes do not allow (columns or channels that
``n`` does not divide, no partner, a reader of the split columns that is not elementwise,
a grouped Conv, shapes unknown before the run) stays
replicated and the report says why.

:func:`segments` cuts a card's graph at the collectives: segment k holds what collective
k's input needs that no earlier segment computes, the last one the rest; each segment is
a graph of its own (inputs: graph inputs, collective results, other segments' values).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np

from graphexec.ir import Graph, Node, TensorType

ELEMENTWISE = {"Relu", "Gelu", "Sigmoid", "Tanh", "Erf", "Identity", "LeakyRelu", "Elu", "Selu", "Softplus",
               "Neg", "Abs", "Exp", "HardSigmoid", "HardSwish", "Dropout", "Add", "Mul", "Sub", "Div", "Pow",
               "Max", "Min"}


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


def _matmul_weight(g: Graph, node: Node) -> tuple[np.ndarray, bool] | str:
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
    return w, trans


def _weight(g: Graph, node: Node) -> tuple[np.ndarray, bool]:
    w = _matmul_weight(g, node)
    assert not isinstance(w, str), w
    return w


def _bias_ok(c: np.ndarray, h: int) -> bool:
    return c.size == 1 or (c.shape[-1] == h and c.size == h)


def _region(g: Graph, a: Node, order: dict[str, int], h: int, used: set[str]) -> tuple[list[Node], Node] | str:
    """The elementwise nodes from ``a``'s output to its row-parallel partner, or why not."""
    region = {a.outputs[0]}
    nodes: list[Node] = []
    partner: Node | None = None
    for node in g.nodes[order[a.name] + 1:]:
        ins = [i for i in node.inputs if i in region]
        if not ins:
            continue
        w = _matmul_weight(g, node)
        if (partner is None and not isinstance(w, str) and node.inputs[0] in region and node.inputs[1] not in region
                and node.name not in used and (w[0].shape[1] if w[1] else w[0].shape[0]) == h):
            partner = node
            continue
        if node.op not in ELEMENTWISE:
            return f"{node.name} ({node.op}) reads the split columns"
        for i in node.inputs:
            if i in region or not i:
                continue
            c = g.values[i].const
            if c is None or not _bias_ok(c, h):
                return f"{node.name} ({node.op}) mixes the split columns with {i!r}"
        nodes.append(node)
        region.update(o for o in node.outputs if o)
    if partner is None:
        return "no MatMul/Gemm with a constant weight reads its output through elementwise ops"
    read = {i for node in nodes for i in node.inputs} | {partner.inputs[0], a.outputs[0], partner.outputs[0]}
    for v in (region | {partner.outputs[0]}) & read:   # an unread output (a Dropout's mask) may stay untyped
        t = g.values[v].type
        if not t.is_static or not t.shape or t.shape[-1] != (h if v in region else t.shape[-1]):
            return f"{v!r} has shape {t}, not [..., {h}] known before the run"
    if region & set(g.outputs):
        return "a value between the pair is a graph output"
    return nodes, partner


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


def split_graph(g: Graph, n: int) -> Split:
    """The per-card graphs of typed graph ``g`` over ``n`` cards (see the module doc)."""
    order = {node.name: i for i, node in enumerate(g.nodes)}
    used: set[str] = set()
    pairs: list[tuple[Node, list[Node], Node, int]] = []
    split, replicated = [], []
    convs: list[Node] = []
    for node in g.nodes:
        if node.op not in ("MatMul", "Gemm", "Conv") or node.name in used:
            continue
        if node.op == "Conv":
            why = _conv_ok(g, node, n)
            if why:
                replicated.append({"node": node.name, "op": node.op, "reason": why})
            else:
                convs.append(node)
                chans = int(cast(np.ndarray, g.values[node.inputs[1]].const).shape[0])
                split.append({"nodes": [node.name], "kind": "output channels", "collective": "all_gather",
                              "value": node.outputs[0], "channels": chans})
            continue
        w = _matmul_weight(g, node)
        if isinstance(w, str):
            replicated.append({"node": node.name, "op": node.op, "reason": w})
            continue
        h = w[0].shape[0] if w[1] else w[0].shape[1]
        if h % n:
            replicated.append({"node": node.name, "op": node.op,
                               "reason": f"its {h} output columns do not split over {n} cards"})
            continue
        found = _region(g, node, order, h, used)
        if isinstance(found, str):
            replicated.append({"node": node.name, "op": node.op, "reason": found})
            continue
        region, partner = found
        used.update((node.name, partner.name))
        pairs.append((node, region, partner, h))
        split.append({"nodes": [node.name, partner.name], "kind": "column+row parallel",
                      "collective": "all_reduce", "value": partner.outputs[0], "columns": h})
    report = {"split": split, "replicated": replicated,
              "replicated_nodes": len(g.nodes) - len(convs) - sum(2 + len(p[1]) for p in pairs)}
    cards: list[Graph] = []
    colls: list[Collective] = []
    for r in range(n):
        card, colls = _rewrite(g, pairs, convs, r, n)
        cards.append(card)
    return Split(cards, colls, report)


def _rewrite(g: Graph, pairs: list[tuple[Node, list[Node], Node, int]], convs: list[Node], r: int, n: int
             ) -> tuple[Graph, list[Collective]]:
    """Card ``r``'s graph: sharded weights, partial sums, nodes after the all-reduces."""
    out = copy.copy(g)
    out.values = {k: copy.copy(v) for k, v in g.values.items()}
    out.meta = dict(g.meta)
    nodes = {node.name: copy.copy(node) for node in g.nodes}
    extra: dict[str, list[Node]] = {}
    colls: list[Collective] = []

    def const(node: Node, k: int, arr: np.ndarray) -> None:
        name = f"{node.inputs[k]}__tp{r}of{n}"
        if name not in out.values:
            v = out.value(name)
            v.const, v.type = arr, TensorType(arr.dtype, tuple(arr.shape))
        node.inputs = list(node.inputs)
        node.inputs[k] = name

    for a, region, b, _h in pairs:
        na, nb = nodes[a.name], nodes[b.name]
        wa, ta = _weight(g, a)
        const(na, 1, _shard(wa, 0 if ta else 1, r, n))
        if a.op == "Gemm" and len(a.inputs) > 2 and a.inputs[2]:
            c = g.values[a.inputs[2]].const
            if c is not None and c.size > 1:
                const(na, 2, _shard(c.reshape(-1), 0, r, n))
        for v in [a.outputs[0]] + [o for node in region for o in node.outputs if o]:
            t = g.values[v].type   # the split columns: the last dim over n
            if t.is_static and t.shape:
                out.values[v].type = TensorType(t.dtype, (*t.shape[:-1], cast(int, t.shape[-1]) // n))
        for node in region:
            nr = nodes[node.name]
            for k, i in enumerate(node.inputs):
                c = g.values[i].const if i else None
                if c is not None and c.size > 1:
                    const(nr, k, _shard(c, c.ndim - 1, r, n))
        wb, tb = _weight(g, b)
        const(nb, 1, _shard(wb, 1 if tb else 0, r, n))
        y = b.outputs[0]
        partial, total = f"{y}__partial", y
        bias = b.inputs[2] if b.op == "Gemm" and len(b.inputs) > 2 and b.inputs[2] else None
        nb.inputs = nb.inputs[:2]
        nb.outputs = [partial]
        out.value(partial).type = g.values[y].type
        if bias is not None or y in g.outputs:
            total = f"{y}__sum"
            out.value(total).type = g.values[y].type
            after = Node(f"{b.name}__tp_bias" if bias else f"{b.name}__tp_out", "Add" if bias else "Identity",
                         [total, bias] if bias else [total], [y])
            extra[b.name] = [after]
        colls.append(Collective("all_reduce", partial, total))
    for conv in convs:
        nc = nodes[conv.name]
        const(nc, 1, _shard(g.values[conv.inputs[1]].const, 0, r, n))   # type: ignore[arg-type]
        if len(conv.inputs) > 2 and conv.inputs[2]:
            const(nc, 2, _shard(g.values[conv.inputs[2]].const, 0, r, n))   # type: ignore[arg-type]
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
        extra[conv.name] = join
    out.nodes = []
    for node in g.nodes:
        out.nodes.append(nodes[node.name])
        out.nodes.extend(extra.get(node.name, []))
    return out, colls


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
