"""Shape inference and constant folding for one input-shape signature.

onnx's shape inference (with data propagation) gives most types; folding turns
subgraphs whose inputs are all constant (weights built by ConstantOfShape, shape
arithmetic) into constants, which in turn lets inference resolve more shapes. After
each whole-model inference one walk over the nodes (``propagate.py``) types and folds
what it left, in order, so the two alternate a round or two instead of once per
custom node or per fold.
"""

from __future__ import annotations

import logging

import numpy as np
import onnx

from graphexec._files import ASIDE_MIN_NODES, interruptible
from graphexec.ir import Graph, Node, TensorType
from graphexec.ir.onnx_proto import has_nodes, tensor_type, to_onnx, value_info
from graphexec.kernels.custom import CustomKernel, lookup_custom
from graphexec.kernels.dispatch import NodeRunner
from graphexec.passes.base import CompileState, Pass, PassResult
from graphexec.passes.contracts import check_graph
from graphexec.passes.propagate import better, type_node, unsettled
from graphexec.passes.size_check import fold_too_big

log = logging.getLogger(__name__)

_RANDOM_OPS = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
               "Multinomial", "Bernoulli"}
ROUNDS = 4   # whole-model inferences past the custom nodes' count (a walk rarely leaves any)
_SMALL_CONST = 4096  # constants up to this many elements go to inference as data


def infer_types(graph: Graph, fold: bool = False) -> bool:
    """Type the graph: onnx's whole-model inference, then one walk over the nodes for what it
    left (custom nodes' shape rules, single-node inference past them, and with ``fold``
    the folds that the new types allow); True if any type changed or any node folded.

    onnx skips ops it does not know and sees no value a fold makes, so the two repeat
    while the walk finds something (the next inference sees the custom nodes' outputs
    as value_info, and the new constants as data).
    """
    customs = _customs(graph)
    protos: dict[str, onnx.TensorProto] = {}   # constants as data, converted once per call
    base = _base_model(graph, protos)   # the nodes, inputs and constants change only with a fold
    changed = False
    for _ in range(len(customs) + ROUNDS):
        step = _onnx_infer(graph, customs, base)
        typed, folded = walk(graph, fold)
        step = step or typed or folded
        changed |= step
        if not (typed or folded):
            break
        if folded:   # removed nodes, new constants: what the next inference sees changed
            base = _base_model(graph, protos)
    return changed


def _customs(graph: Graph) -> list[Node]:
    """The nodes a custom kernel's shape rules serve, looked up once per (op, domain)."""
    served: dict[tuple[str, str], bool] = {}
    out = []
    for n in graph.nodes:
        hit = served.get((n.op, n.domain))
        if hit is None:
            hit = served[n.op, n.domain] = _rules(graph, n) is not None
        if hit:
            out.append(n)
    return out


def walk(graph: Graph, fold: bool) -> tuple[bool, bool]:
    """One pass in node order: (any type got better, any node folded).

    Only a fold makes a constant, and every node was checked after the last one, so a
    node can have become foldable only through an input folded in this walk (a subgraph's
    outer-scope reads included), or (Shape, Size) through its input's type becoming static.
    """
    kept, typed = [], False
    made: set[str] = set()
    for node in graph.nodes:
        if fold and (node.op in ("Shape", "Size") or (made and any(n in made for n in node.all_inputs))) \
                and _foldable(node, graph):
            _fold(node, graph)
            made.update(node.outputs)
            continue
        kept.append(node)
        if unsettled(graph, node) and type_node(graph, node, _rules(graph, node)):
            typed = True
    if made:
        graph.nodes = kept
    return typed, bool(made)


def _rules(graph: Graph, node: Node) -> CustomKernel | None:
    """The shape rules of the kernel serving the node at the graph's opset (ORT's pre-17
    LayerNormalization has its own), or None."""
    return lookup_custom(node.op, node.domain, graph.opsets.get(node.domain or "", 1))


def _base_model(graph: Graph, protos: dict[str, onnx.TensorProto]) -> onnx.ModelProto:
    """The graph as onnx sees it: small constants as data (their protos kept in ``protos``:
    a constant never changes), the others as typed inputs."""
    small = {n: c for n, c in graph.constants.items()
             if isinstance(c, np.ndarray) and c.size <= _SMALL_CONST and c.dtype != object}
    model = to_onnx(graph, with_constants=False)
    for n, c in small.items():
        if n not in protos:
            protos[n] = onnx.numpy_helper.from_array(c, n)
    model.graph.initializer.extend(protos[n] for n in small)
    model.graph.input.extend(value_info(n, graph.values[n].type) for n in graph.constants if n not in small)
    return model


def _onnx_infer(graph: Graph, customs: list[Node], model: onnx.ModelProto) -> bool:
    """One onnx inference over ``model`` (``_base_model``) with the custom nodes' outputs and
    the graph outputs typed as they are now."""
    del model.graph.value_info[:]
    model.graph.value_info.extend(value_info(o, graph.values[o].type) for n in customs for o in n.outputs if o)
    del model.graph.output[:]
    model.graph.output.extend(value_info(n, graph.values[n].type if n in graph.values else None)
                              for n in graph.outputs)
    try:
        inferred = interruptible(lambda: onnx.shape_inference.infer_shapes(model, strict_mode=False, data_prop=True),
                                 big=has_nodes(model.graph, ASIDE_MIN_NODES))
    except Exception as e:  # noqa: BLE001  (inference is best effort; kernels decide at run time)
        log.debug("shape inference failed on %s: %s", graph.source, e)
        return False
    changed = False
    seen: dict[bytes, TensorType] = {}   # a model's values share a few types: each read once
    for vi in list(inferred.graph.value_info) + list(inferred.graph.output):
        v = graph.values.get(vi.name)
        if v is None or v.const is not None or v.type.is_static:   # a static type is never bettered
            continue
        key = vi.type.SerializeToString()
        t = seen.get(key) or seen.setdefault(key, tensor_type(vi.type))
        if better(t, v.type):
            v.type = t
            changed = True
    return changed


def _foldable(node: Node, graph: Graph) -> bool:
    if node.op in _RANDOM_OPS or node.op == "Optional" or node.domain not in ("", "ai.onnx"):
        return False   # an empty Optional is None, which no constant holds
    values = graph.values
    for n in node.all_inputs:
        v = values.get(n)
        if v is None or v.const is None:
            break
    else:   # every input is a constant
        return not fold_too_big(node, graph)
    if node.op in ("Shape", "Size") and node.inputs and graph.values[node.inputs[0]].type.is_static:
        return True
    return False


def _is_const(graph: Graph, name: str) -> bool:
    v = graph.values.get(name)
    return v is not None and v.const is not None


def _shape_only(node: Node, graph: Graph) -> dict[str, np.ndarray]:
    t = graph.values[node.inputs[0]].type
    shape = np.array(t.shape, dtype=np.int64)
    if node.op == "Size":
        return {node.outputs[0]: np.array(shape.prod(), dtype=np.int64)}
    start, end = node.attrs.get("start", 0), node.attrs.get("end", None)
    return {node.outputs[0]: shape[slice(start, end)]}


def fold_constants(graph: Graph) -> bool:
    """Evaluate nodes with constant inputs at compile time. True if any folded."""
    kept, folded = [], False
    for node in graph.nodes:
        if not _foldable(node, graph):
            kept.append(node)
            continue
        _fold(node, graph)
        folded = True
    graph.nodes = kept
    return folded


def _fold(node: Node, graph: Graph) -> None:
    """Compute ``node`` now: its outputs become constants (the caller drops the node)."""
    if node.op in ("Shape", "Size") and not _is_const(graph, node.inputs[0]):
        outs = _shape_only(node, graph)
    else:
        outs = NodeRunner(node, graph)({n: graph.values[n].const for n in node.all_inputs})
    for name, arr in outs.items():
        v = graph.values[name]
        v.const = arr
        if isinstance(arr, np.ndarray):
            v.type = TensorType(arr.dtype, arr.shape)


class ShapeInference(Pass):
    """Bind the feed shapes, fold, then type and fold to a fixed point (``infer_types``)."""

    name = "shapes"

    def call(self, state: CompileState) -> PassResult:
        graph = state.graph   # the session's private copy: inference writes its value types
        for name, t in state.options.input_types.items():
            graph.values[name].type = t
        fold = state.options.fold
        folded = fold_constants(graph) if fold else False   # before the first inference: it sees the constants
        changed = infer_types(graph, fold) or folded   # its last walk folded what the final types allow
        return PassResult(state, changed)

    def ensures(self, state: CompileState) -> None:
        check_graph(state.graph)
