"""Data formats as GE gives them on a DaVinci chip: where a TransData task goes.

The cube keeps a 4-D activation in NC1HWC0 (the profile's ``layout``: C in blocks of C0
channels, C0 innermost); a tensor in the plain NCHW layout (ND) is converted with a
TransData task wherever the op that reads it needs the other format (GE inserts one
between a producer and a consumer whose formats differ). Each op here is one of:

- **5HD** (needs NC1HWC0): Conv, ConvTranspose, the pools, BatchNormalization, LRN;
- **either** (runs in its inputs' format, NC1HWC0 when any 4-D input is in it):
  elementwise ops, reductions over H and W, Resize on H and W, and a Concat, Split or Slice
  that leaves C alone or cuts it at multiples of C0 (whole C1 blocks);
- **ND** (needs NCHW): everything else, notably a Reshape, Flatten or Transpose of a 4-D
  tensor (the channel shuffle's view and transpose split the channel axis) and a Concat,
  Split or Slice on a channel count C0 does not divide (ShuffleNet's 58-channel halves).

Graph inputs are taken in the format their readers need, and so are the outputs of an op of
either kind that reads graph inputs only (a pipeline stage's first Relu): ATC loads a model's input
with AIPP, or the first convolution's small-channel path, or a TransData, as its options say,
and the measured rows do not record which. One TransData per value and direction serves every reader that
needs it. None is inserted where both layouts hold the same bytes (H = W = 1 and C a
multiple of C0: a pooled feature map before the classifier). A value that leaves the graph
in NC1HWC0 keeps that format here (the device would convert it once more on its way out).
The TransData node computes the identity (``kernels/layout.py``), so outputs are unchanged.
"""

from __future__ import annotations

from dataclasses import replace

import onnx

from graphexec.ir import Graph, Node, Value
from graphexec.kernels.fused import is_fused
from graphexec.kernels.layout import LAYOUT_DOMAIN
from graphexec.passes.base import CompileState, Pass, PassResult

FIVE_HD = {"Conv", "ConvTranspose", "MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool",
           "BatchNormalization", "LRN"}
EITHER = {"Relu", "LeakyRelu", "PRelu", "Sigmoid", "Tanh", "Clip", "HardSigmoid", "HardSwish", "Elu", "Selu",
          "Softplus", "Abs", "Neg", "Exp", "Sqrt", "Erf", "Add", "Sub", "Mul", "Div", "Max", "Min", "Pow",
          "Dropout", "Cast", "Identity", "Sum", "Mean"}
REDUCES = {"ReduceMean", "ReduceMax", "ReduceSum", "ReduceMin"}
CHANNEL_OPS = {"Concat", "Split", "Slice"}
ND, FIVE, ANY = "ND", "NC1HWC0", "either"


def _shape(graph: Graph, name: str) -> tuple[int, ...] | None:
    t = graph.values[name].type if name in graph.values else None
    return tuple(t.shape) if t is not None and t.is_static and t.shape is not None else None  # type: ignore[arg-type]


def _is4(graph: Graph, name: str) -> bool:
    s = _shape(graph, name)
    return s is not None and len(s) == 4


def _channels_whole(graph: Graph, node: Node, c0: int) -> bool:
    """A Concat, Split or Slice that leaves C alone, or cuts it into whole C0 blocks."""
    names = [n for n in node.inputs[:1 if node.op != "Concat" else None] + node.outputs if n]
    shapes = [_shape(graph, n) for n in names]
    if any(s is None or len(s) != 4 for s in shapes):
        return False
    if len({s[1] for s in shapes}) == 1:   # type: ignore[index]
        return True
    if node.op == "Slice":
        starts = graph.values[node.inputs[1]].const if len(node.inputs) > 1 else None
        axes = graph.values[node.inputs[3]].const if len(node.inputs) > 3 and node.inputs[3] else None
        if starts is None:
            return False
        axes_l = [int(a) % 4 for a in axes] if axes is not None else list(range(len(starts)))
        if any(int(s) % c0 for a, s in zip(axes_l, starts) if a == 1):
            return False
    return all(s[1] % c0 == 0 for s in shapes)   # type: ignore[index]


def _reduces_hw(node: Node, graph: Graph) -> bool:
    axes = node.attrs.get("axes")
    if axes is None and len(node.inputs) > 1 and node.inputs[1]:
        c = graph.values[node.inputs[1]].const
        axes = None if c is None else [int(a) for a in c]
    return axes is not None and {int(a) % 4 for a in axes} <= {2, 3}


def need(node: Node, graph: Graph, c0: int) -> str:
    """The format ``node`` reads its 4-D activations in: FIVE, ND or ANY (its inputs')."""
    op = node.meta["members"][0].op if is_fused(node) else node.op
    if node.domain and not is_fused(node):
        return ND
    if op in FIVE_HD:
        return FIVE
    if op in EITHER or (op in REDUCES and _reduces_hw(node, graph)):
        return ANY
    if op == "Resize" and node.outputs and _is4(graph, node.inputs[0]):
        src, dst = _shape(graph, node.inputs[0]), _shape(graph, node.outputs[0])
        return ANY if src and dst and src[:2] == dst[:2] else ND
    if op in CHANNEL_OPS and not is_fused(node):
        return ANY if _channels_whole(graph, node, c0) else ND
    return ND


def _same_bytes(graph: Graph, name: str, c0: int) -> bool:
    """Whether NCHW and NC1HWC0 hold ``name``'s bytes in the same order (H = W = 1, C0 | C)."""
    s = _shape(graph, name)
    return s is not None and s[2] * s[3] == 1 and s[1] % c0 == 0


class _Rewrite:
    """The walk in graph order: each value's format, the TransData nodes made so far."""

    def __init__(self, graph: Graph, c0: int) -> None:
        self.graph, self.c0 = graph, c0
        self.fmt: dict[str, str] = {}
        self.made: dict[tuple[str, str], str] = {}
        self.nodes: list[Node] = []
        self.inputs = set(graph.inputs)   # values in whichever format their readers need

    def convert(self, name: str, to: str) -> str:
        """``name`` in format ``to``: itself, or the output of a TransData made once."""
        if self.fmt.get(name, ND) == to or name in self.inputs or _same_bytes(self.graph, name, self.c0):
            return name
        key = (name, to)
        if key not in self.made:
            out = f"{name}::{'5hd' if to == FIVE else 'nd'}"
            self.graph.values[out] = Value(out, self.graph.values[name].type)
            src = self.fmt.get(name, ND)
            self.nodes.append(Node(f"trans_TransData_{len(self.made)}", "TransData", [name], [out],
                                   {"src_format": src, "dst_format": to, "c0": self.c0}, LAYOUT_DOMAIN))
            self.fmt[out] = to
            self.made[key] = out
        return self.made[key]

    def visit(self, node: Node) -> None:
        g = self.graph
        acts = [n for n in node.inputs if n and n in g.values and g.values[n].const is None and _is4(g, n)]
        want = need(node, g, self.c0) if acts else ND
        own = [n for n in acts if n not in self.inputs]
        if want == ANY and acts and not own:   # made from graph inputs only: as free as they are
            self.nodes.append(node)
            self.inputs.update(o for o in node.outputs if o)
            return
        if want == ANY:
            want = FIVE if any(self.fmt.get(n, ND) == FIVE for n in own) else ND
        renamed = {n: self.convert(n, want) for n in acts if not node.implicit_inputs}
        if any(new != old for old, new in renamed.items()):
            _rename_inputs(node, renamed)
        self.nodes.append(node)
        for o in node.outputs:
            if o and _is4(g, o):
                self.fmt[o] = want


def _rename_inputs(node: Node, renamed: dict[str, str]) -> None:
    """Point ``node`` (a fused node's members too, its ONNX proto too) at the converted values;
    new lists and members, since a clone of the graph shares them with the graph it copies."""
    node.inputs = [renamed.get(n, n) for n in node.inputs]
    if is_fused(node):
        node.meta = {**node.meta, "members": [replace(m, inputs=[renamed.get(n, n) for n in m.inputs])
                                              for m in node.meta["members"]]}
    if isinstance(node.proto, onnx.NodeProto):
        proto = onnx.NodeProto()
        proto.CopyFrom(node.proto)
        proto.input[:] = node.inputs
        node.proto = proto


def insert_trans_data(graph: Graph, c0: int) -> int:
    """Insert GE's TransData nodes into ``graph`` (in place); how many."""
    walk = _Rewrite(graph, c0)
    for node in graph.nodes:
        walk.visit(node)
    if walk.made:
        graph.nodes = walk.nodes
    return len(walk.made)


class Layout(Pass):
    """TransData where a DaVinci chip converts between NCHW and NC1HWC0 (``profile.layout``)."""

    name = "layout"

    def call(self, state: CompileState) -> PassResult:
        layout, graph = state.profile.layout, state.graph
        if layout is None or "schedule" in graph.meta or state.options.policy == "manual":
            return PassResult(state, False)
        n = insert_trans_data(graph, layout.c0)
        if not n:
            return PassResult(state, False)
        graph.meta["trans_data"] = n
        return PassResult(replace(state, graph=graph), True)
