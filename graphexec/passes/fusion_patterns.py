"""The patterns of the fusion rules (names and order in ``fusion_switch.py``).

Each matcher looks at one node as the head (or anchor) of its pattern and returns the
group to fuse or None; ``graph_fusion.run_rule`` checks that the group hides no value
read outside it. ConvBatchnormFusionPass rewrites instead of grouping (``_fold_bn``).
"""

from __future__ import annotations

from itertools import takewhile

import numpy as np

from graphexec.ir import Graph, Node, TensorType, Value
from graphexec.kernels.fused import affine_batchnorm, is_fused
from graphexec.passes.fusion_groups import Match, View, carried, fused_names, make_fused
from graphexec.passes.lowering import dtype_name

# one-input elementwise ops a conv or matmul epilogue applies (the activation family)
ACTIVATIONS = ("Relu", "LeakyRelu", "Sigmoid", "Tanh", "Clip", "HardSigmoid", "HardSwish", "Elu", "Selu",
               "Softplus", "Gelu", "Mish", "ThresholdedRelu", "Celu")
# ops a vector kernel computes element by element (inputs broadcast)
ELEMENTWISE = ACTIVATIONS + ("Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Exp", "Log", "Sqrt", "Reciprocal",
                             "Neg", "Abs", "Erf", "Floor", "Ceil", "Round", "Sign", "Cast", "Sin", "Cos",
                             "Where", "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "And", "Or",
                             "Not", "PRelu", "Sum", "BatchNormalization")
_FLOATS = ("float16", "float32", "bfloat16", "float64")
ELTWISE_MAX = 6      # TbeEltwiseFusionPass: at most 6 consecutive ElemWise/Broadcast nodes (CANN 8.1 docs)
AUTOMATIC_MAX = 28   # AutomaticUbFusion: at most 28 elementwise ops (CANN 8.0 docs; 29 in 9.0)


def _float(view: View, name: str) -> bool:
    t = view.graph.values[name].type
    return t.dtype is not None and dtype_name(t.dtype) in _FLOATS


def _scalar(view: View, name: str, value: float | None = None) -> bool:
    c = view.const(name)
    if c is None or c.size != 1:
        return False
    return value is None or bool(np.isclose(float(c.reshape(-1)[0]), value, rtol=1e-3))


# ---- graph fusion ------------------------------------------------------------------

def _conv_consts(view: View, node: Node) -> bool:
    """A plain Conv whose filter (and bias, if any) are float constants."""
    if not view.kernel(node, "Conv") or is_fused(node) or len(node.inputs) < 2:
        return False
    w = view.const(node.inputs[1])
    has_b = len(node.inputs) > 2 and bool(node.inputs[2])
    return w is not None and w.ndim >= 3 and w.dtype.name in _FLOATS \
        and (not has_b or view.const(node.inputs[2]) is not None)


def _channel_const(view: View, node: Node, x: str, channels: int) -> np.ndarray | None:
    """The constant of Mul/Add(x, c) as one value per channel (axis 1), or None."""
    other = [i for i in node.inputs if i != x]
    c = view.const(other[0]) if len(other) == 1 and node.inputs.count(x) == 1 else None
    rank = len(view.graph.values[x].type.shape or ())
    if c is None or c.ndim > rank or c.dtype.name not in _FLOATS:
        return None
    shape = (1,) * (rank - c.ndim) + c.shape
    if any(d != 1 for i, d in enumerate(shape) if i != 1) or shape[1] not in (1, channels):
        return None
    return np.broadcast_to(c.reshape(-1), (channels,))


def _scales(view: View, start: Node, channels: int) -> list[Node]:
    """The Mul/Add nodes with one constant per channel that follow ``start``, each the one
    reader of the one before."""
    out: list[Node] = []
    node = start
    while len(out) < 8:
        nxt = view.next(node)
        if nxt is None or not view.kernel(nxt, "Mul", "Add") \
                or _channel_const(view, nxt, node.outputs[0], channels) is None:
            break
        out.append(nxt)
        node = nxt
    return out


def conv_batchnorm(view: View, node: Node) -> Match | None:
    """Conv (constant filter and bias) -> inference BatchNormalization [-> per-channel Mul/Add]."""
    if not _conv_consts(view, node):
        return None
    channels = view.const(node.inputs[1]).shape[0]   # type: ignore[union-attr]
    bn = view.next(node)
    if bn is None or not view.kernel(bn, "BatchNormalization") or bn.attrs.get("training_mode", 0) \
            or view.opset < 9 or len(bn.inputs) != 5 or bn.inputs[0] != node.outputs[0]:
        return None
    params = [view.const(n) for n in bn.inputs[1:]]
    if any(p is None or p.shape != (channels,) for p in params):
        return None
    return Match("ConvBatchnormFusionPass", (node, bn, *_scales(view, bn, channels)), "Conv")


def conv_scale(view: View, node: Node) -> Match | None:
    """Conv (constant filter and bias) -> Mul/Add by one constant per channel (Caffe's Scale
    layer as ONNX exports it): ConvScaleFusionPass."""
    if not _conv_consts(view, node):
        return None
    rest = _scales(view, node, view.const(node.inputs[1]).shape[0])   # type: ignore[union-attr]
    return Match("ConvScaleFusionPass", (node, *rest), "Conv") if rest else None


def _fold(m: Match, graph: Graph) -> Node:
    """A Conv whose filter and bias have the following BatchNormalization and per-channel
    Mul/Add folded in (new constants), in float64 and rounded once."""
    conv = m.nodes[0]
    vals = graph.values
    w = vals[conv.inputs[1]].const
    assert w is not None
    b = vals[conv.inputs[2]].const if len(conv.inputs) > 2 and conv.inputs[2] else None
    k, s = np.ones(w.shape[0]), np.zeros(w.shape[0]) if b is None else b.astype(np.float64)
    view = View(graph)
    for prev, n in zip(m.nodes, m.nodes[1:]):
        if n.op == "BatchNormalization":
            scale, bias, mean, var = (vals[i].const for i in n.inputs[1:])
            assert scale is not None and bias is not None and mean is not None and var is not None
            kk, ss = affine_batchnorm(scale, bias, mean, var, float(n.attrs.get("epsilon", 1e-5)))
        else:
            c = _channel_const(view, n, prev.outputs[0], w.shape[0])
            assert c is not None
            c = c.astype(np.float64)
            kk, ss = (c, np.zeros_like(c)) if n.op == "Mul" else (np.ones_like(c), c)
        k, s = k * kk, s * kk + ss
    w2 = (w.astype(np.float64) * k.reshape((-1,) + (1,) * (w.ndim - 1))).astype(w.dtype)
    b2 = s.astype(w.dtype)
    base = m.nodes[-1].outputs[0]
    consts = [f"{base}::fused_W", f"{base}::fused_B"]
    for name, c in zip(consts, (w2, b2)):
        vals[name] = Value(name, TensorType(c.dtype, tuple(c.shape)), c)
    names = [x for n in m.nodes for x in fused_names(n)]
    meta = {"fused": names, "fused_ops": [n.op for n in m.nodes], "rules": [m.rule], **carried(conv)}
    return Node("+".join(names), "Conv", [conv.inputs[0], *consts], list(m.nodes[-1].outputs),
                dict(conv.attrs), meta=meta)


def _chain(view: View, start: Node, ops: tuple[str, ...], most: int, plain: bool = False) -> list[Node]:
    """Up to ``most`` nodes after ``start``, each the one reader of the one before, of ``ops``
    (``plain``: none fused before)."""
    out: list[Node] = []
    node: Node | None = start
    while node is not None and len(out) < most:
        nxt = view.next(node)
        if nxt is None or not view.kernel(nxt, *ops) or nxt.inputs.count(node.outputs[0]) != 1 \
                or (plain and is_fused(nxt)):
            break
        out.append(nxt)
        node = nxt
    return out


def layer_norm(view: View, node: Node) -> Match | None:
    """ReduceMean(x) -> Sub(x, mean) -> Pow(., 2) -> ReduceMean -> Add(eps) -> Sqrt ->
    Div(x - mean, .) [-> Mul(gamma) [-> Add(beta)]]: LayerNormONNXFusionPass."""
    if not view.kernel(node, "ReduceMean") or not _float(view, node.inputs[0]):
        return None
    x = node.inputs[0]
    sub = view.next(node)
    if sub is None or not view.kernel(sub, "Sub") or sub.inputs != [x, node.outputs[0]]:
        return None
    d = sub.outputs[0]
    users = view.users.get(d, [])
    pw = next((u for u in users if u.op == "Pow" and u.inputs[0] == d and _scalar(view, u.inputs[1], 2.0)), None)
    if pw is None or len(users) != 2 or d in view.outputs:
        return None
    rest = _chain(view, pw, ("ReduceMean", "Add", "Sqrt", "Div"), 4)
    if [n.op for n in rest] != ["ReduceMean", "Add", "Sqrt", "Div"] or rest[3].inputs[0] != d \
            or not _scalar(view, rest[1].inputs[1]):
        return None
    div = rest[3]
    if not any(u is div for u in users):
        return None
    tail = list(takewhile(lambda t: any(view.const(i) is not None for i in t.inputs),
                          _chain(view, div, ("Mul", "Add"), 2)))
    group = (node, sub, pw, *rest, *tail)
    return Match("LayerNormONNXFusionPass", group, "LayerNormalization")


def gelu(view: View, node: Node) -> Match | None:
    """x / sqrt(2) (or x * 1/sqrt(2)) -> Erf -> Add(1) -> Mul(x) -> Mul(0.5), the two Muls in
    either order or the 0.5 taken of x first: GeluONNXFusionPass."""
    if not view.kernel(node, "Div", "Mul") or not _float(view, node.inputs[0]) \
            or not _scalar(view, node.inputs[1], np.sqrt(2.0) if node.op == "Div" else 1 / np.sqrt(2.0)):
        return None
    x = node.inputs[0]
    after = _chain(view, node, ("Erf", "Add", "Mul"), 4)
    ops = [n.op for n in after]
    if ops[:2] != ["Erf", "Add"] or not _scalar(view, after[1].inputs[1], 1.0) or ops.count("Mul") < 1:
        return None
    muls = after[2:4]
    group: list[Node] = [node, *after[:2]]
    seen_x = seen_half = False
    for m in muls:
        if m.op != "Mul":
            break
        other = [i for i in m.inputs if i != group[-1].outputs[0]]
        if len(other) != 1:
            break
        o = other[0]
        if o == x and not seen_x:
            seen_x = True
        elif _scalar(view, o, 0.5) and not seen_half:
            seen_half = True
        else:
            half = view.producer.get(o)
            if seen_x or half is None or half.op != "Mul" or x not in half.inputs or view.only_user(o) is not m \
                    or not any(_scalar(view, i, 0.5) for i in half.inputs):
                break
            group.insert(0, half)
            seen_x = seen_half = True
        group.append(m)
        if seen_x and seen_half:
            order = {id(n): i for i, n in enumerate(view.graph.nodes)}
            return Match("GeluONNXFusionPass", tuple(sorted(group, key=lambda n: order[id(n)])), "Gelu")
    return None


def matmul_bias(view: View, node: Node) -> Match | None:
    """MatMul -> Add(a constant bias along the last axis): MatMulBiasAddFusionPass."""
    if not view.kernel(node, "MatMul") or is_fused(node):
        return None
    add = view.next(node)
    if add is None or not view.kernel(add, "Add"):
        return None
    other = [i for i in add.inputs if i != node.outputs[0]]
    c = view.const(other[0]) if len(other) == 1 else None
    n = view.graph.values[node.outputs[0]].type.shape
    if c is None or not n or c.size != n[-1] or c.shape[-1:] != (n[-1],):
        return None
    return Match("MatMulBiasAddFusionPass", (node, add), "MatMul")


# ---- UB fusion ---------------------------------------------------------------------

def conv_double_in(view: View, node: Node) -> Match | None:
    """Conv -> Add(another tensor of the output's shape) [-> activation]: the residual tail."""
    if not view.kernel(node, "Conv") or is_fused(node):
        return None
    add = view.next(node)
    if add is None or not view.kernel(add, "Add", "Sum") or len(add.inputs) != 2 \
            or add.inputs.count(node.outputs[0]) != 1:
        return None
    other = [i for i in add.inputs if i != node.outputs[0]][0]
    shape = view.graph.values[node.outputs[0]].type.shape
    if view.const(other) is not None or view.graph.values[other].type.shape != shape:
        return None
    act = _chain(view, add, ACTIVATIONS, 1)
    return Match("TbeConvDoubleInFusionPass", (node, add, *act), "Conv")


def conv_elemwise(view: View, node: Node) -> Match | None:
    """Conv -> one one-input elementwise op (Relu, ...)."""
    if not view.kernel(node, "Conv") or is_fused(node):
        return None
    act = _chain(view, node, ACTIVATIONS, 1)
    return Match("ConvElemwiseUbFusion", (node, *act), "Conv") if act else None


def matmul_elemwise(view: View, node: Node) -> Match | None:
    """MatMul/Gemm (with its bias) -> up to two activations: ATbeMatmulElemwiseFusionPass."""
    if not view.kernel(node, "MatMul", "Gemm") \
            or (is_fused(node) and node.meta["rules"] != ["MatMulBiasAddFusionPass"]):
        return None
    act = _chain(view, node, ACTIVATIONS, 2)
    return Match("ATbeMatmulElemwiseFusionPass", (node, *act), node.op) if act else None


def softmax_prologue(view: View, node: Node) -> Match | None:
    """Mul/Div (a scale) [-> Add (a mask)] -> Softmax, or Add (a mask) -> Softmax: the
    elementwise ops before the reduce run in its kernel (TbeReduceElemwiseFusionPass)."""
    if not view.kernel(node, "Mul", "Div", "Add") or not _float(view, node.outputs[0]):
        return None
    if node.op != "Add" and not any(_scalar(view, i) for i in node.inputs[1:]):
        return None
    rest = _chain(view, node, ("Add", "Softmax"), 2)
    ops = [n.op for n in rest]
    if ops == ["Softmax"] or (ops == ["Add", "Softmax"] and node.op != "Add"):
        return Match("TbeReduceElemwiseFusionPass", (node, *rest), "Softmax")
    return None


def _eltwise(most: int, rule: str):   # noqa: ANN202 (a matcher)
    def match(view: View, node: Node) -> Match | None:
        if is_fused(node) or not view.kernel(node, *ELEMENTWISE):
            return None
        rest = _chain(view, node, ELEMENTWISE, most - 1, plain=True)
        return Match(rule, (node, *rest)) if rest else None
    return match


RULE_MATCHERS = (
    ("ConvBatchnormFusionPass", conv_batchnorm, _fold),
    ("ConvScaleFusionPass", conv_scale, _fold),
    ("LayerNormONNXFusionPass", layer_norm, make_fused),
    ("GeluONNXFusionPass", gelu, make_fused),
    ("MatMulBiasAddFusionPass", matmul_bias, make_fused),
    ("TbeConvDoubleInFusionPass", conv_double_in, make_fused),
    ("ConvElemwiseUbFusion", conv_elemwise, make_fused),
    ("ATbeMatmulElemwiseFusionPass", matmul_elemwise, make_fused),
    ("TbeReduceElemwiseFusionPass", softmax_prologue, make_fused),
    ("TbeEltwiseFusionPass", _eltwise(ELTWISE_MAX, "TbeEltwiseFusionPass"), make_fused),
    ("AutomaticUbFusion", _eltwise(AUTOMATIC_MAX, "AutomaticUbFusion"), make_fused),
)

# Each rule's head ops: the ops its matcher's first check (``View.kernel(node, *ops)``)
# accepts, so a node of any other op is not offered to it (``run_rule``'s ``heads``).
HEADS: dict[str, frozenset[str]] = {
    "ConvBatchnormFusionPass": frozenset({"Conv"}),
    "ConvScaleFusionPass": frozenset({"Conv"}),
    "LayerNormONNXFusionPass": frozenset({"ReduceMean"}),
    "GeluONNXFusionPass": frozenset({"Div", "Mul"}),
    "MatMulBiasAddFusionPass": frozenset({"MatMul"}),
    "TbeConvDoubleInFusionPass": frozenset({"Conv"}),
    "ConvElemwiseUbFusion": frozenset({"Conv"}),
    "ATbeMatmulElemwiseFusionPass": frozenset({"MatMul", "Gemm"}),
    "TbeReduceElemwiseFusionPass": frozenset({"Mul", "Div", "Add"}),
    "TbeEltwiseFusionPass": frozenset(ELEMENTWISE),
    "AutomaticUbFusion": frozenset(ELEMENTWISE),
}
