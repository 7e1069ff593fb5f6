"""Types and constants in one walk over the nodes, for what a whole-model inference left.

onnx's inference of the whole model stops at every custom node (it does not know the
op) and at every shape that only a fold can make constant, so the shapes pass used to
alternate it with the custom shape rules and the fold: a 3-layer encoder of contrib ops
took 16 whole-model inferences, a tf2onnx BERT 4 rounds of fold and inference. Walking
the nodes in order instead, each node sees its inputs' final types when its turn comes:
a custom node gets its rule, a standard node whose outputs are not yet static gets
onnx's inference of that node alone, and with folding a node whose inputs became
constant is folded on the spot. The whole-model inference still runs around it (its
data propagation sees through Shape chains that a single node cannot).
"""

from __future__ import annotations

import logging

import numpy as np
import onnx
from onnx import helper, numpy_helper

from graphexec.ir import Graph, Node, TensorType
from graphexec.ir.onnx_proto import node_proto, tensor_type, value_info
from graphexec.kernels.custom import CustomKernel, output_types

log = logging.getLogger(__name__)

_DATA_MAX = 4096   # constant inputs up to this many elements go to inference as data
_ONNX_DOMAINS = ("", "ai.onnx", "ai.onnx.ml")


def unsettled(graph: Graph, node: Node) -> bool:
    """Whether some output of ``node`` still lacks a static type (and is not a constant)."""
    for name in node.outputs:
        if name:
            v = graph.values[name]
            if v.const is None and not v.type.is_static:
                return True
    return False


def better(new: TensorType, old: TensorType) -> bool:
    """Whether ``new`` says more than ``old``: static where it was not, or a dtype or shape
    where there was none."""
    if new.is_static and not old.is_static:
        return True
    if old.dtype is None and new.dtype is not None:
        return True
    return old.shape is None and new.shape is not None


def type_node(graph: Graph, node: Node, rules: CustomKernel | None) -> bool:
    """Type ``node``'s outputs from its inputs' types now: its custom rule, or onnx's
    inference of this node alone; True if any output type got better."""
    if rules is not None:
        ins = [graph.values[n].type if n else None for n in node.inputs]
        outs = output_types(rules, ins, node.attrs) or []
        found = dict(zip(node.outputs, outs))
    else:
        found = _infer_one(graph, node)
    changed = False
    for name, t in found.items():
        if not name:
            continue
        v = graph.values[name]
        if v.const is None and not v.type.is_static and better(t, v.type):
            v.type = t
            changed = True
    return changed


def _infer_one(graph: Graph, node: Node) -> dict:
    """onnx's inference of one standard node on its inputs' current types (and the small
    constants among them as data); {} where onnx cannot say (an untyped input, a subgraph,
    an op it does not know, an error)."""
    if node.domain not in _ONNX_DOMAINS or node.implicit_inputs or \
            any(isinstance(a, Graph) or (isinstance(a, list) and a and isinstance(a[0], Graph))
                for a in node.attrs.values()):
        return {}
    types, data = {}, {}
    for name in node.all_inputs:
        v = graph.values[name]
        if v.type.kind != "tensor" or v.type.dtype is None:
            return {}
        types[name] = value_info(name, v.type).type
        c = v.const
        if isinstance(c, np.ndarray) and c.dtype != object and c.size <= _DATA_MAX:
            data[name] = numpy_helper.from_array(c, name)
    try:
        schema = onnx.defs.get_schema(node.op, graph.opsets.get(node.domain or "", 1), node.domain or "")
        opsets = [helper.make_opsetid(d, v) for d, v in sorted(graph.opsets.items())]
        outs = onnx.shape_inference.infer_node_outputs(schema, node_proto(node), types, data,
                                                       opset_imports=opsets)
    except Exception as e:  # noqa: BLE001  (inference is best effort; kernels decide at run time)
        log.debug("no inference of %s alone: %s", node, e)
        return {}
    return {name: tensor_type(tp) for name, tp in outs.items()}
