"""Types of one node's outputs, for checking graphs as they are written.

The builder and the YAML checker type a graph node by node, so an error names the
node that causes it: a custom kernel's own shape rule when it has one, otherwise
onnx's strict shape inference on a one-node model whose inputs carry the types known
so far (small constants go in as data, so a Reshape's target shape is seen).
"""

from __future__ import annotations

import re

import numpy as np
import onnx
from onnx import helper, numpy_helper

from graphexec.errors import GraphError
from graphexec.ir import Graph, Node, TensorType
from graphexec.ir.onnx_proto import node_proto, tensor_type, value_info
from graphexec.kernels.custom import lookup_custom, output_types

_SMALL_CONST = 4096


def infer_node(graph: Graph, node: Node) -> list[TensorType]:
    """One type per node output (unknown where nothing can tell).

    Raises:
        GraphError: the node cannot work on its inputs' types (the message names it).
    """
    unknown = [TensorType() for _ in node.outputs]
    spec = lookup_custom(node.op, node.domain, graph.opsets.get(node.domain or "", 1))
    if spec is not None:
        ins = [graph.values[n].type if n else None for n in node.inputs]
        types = output_types(spec, ins, node.attrs) or []
        return types[:len(unknown)] + unknown[len(types):]
    local = any(f.name == node.op and f.domain == node.domain for f in graph.functions)
    if not local and not onnx.defs.has(node.op, node.domain):
        return unknown
    inferred = _onnx_infer(graph, node)
    return [inferred.get(o, TensorType()) if o else TensorType() for o in node.outputs]


def _onnx_infer(graph: Graph, node: Node) -> dict[str, TensorType]:
    names = list(dict.fromkeys(n for n in node.all_inputs))
    consts = {n: graph.values[n].const for n in names if graph.values[n].const is not None}
    small = {n: c for n, c in consts.items() if isinstance(c, np.ndarray) and c.size <= _SMALL_CONST
             and c.dtype != object}
    inputs = [value_info(n, graph.values[n].type, containers=True) for n in names if n not in small]
    inits = [numpy_helper.from_array(c, n) for n, c in small.items()]
    outs = [onnx.ValueInfoProto(name=o) for o in node.outputs if o]
    g = helper.make_graph([node_proto(node)], node.name or "node", inputs, outs, inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid(d, v) for d, v in sorted(graph.opsets.items())],
                              functions=graph.functions)
    model.ir_version = min(model.ir_version, onnx.IR_VERSION)
    try:
        done = onnx.shape_inference.infer_shapes(model, strict_mode=True, data_prop=True)
    except (onnx.shape_inference.InferenceError, onnx.checker.ValidationError) as e:
        types = ", ".join(str(graph.values[n].type) for n in node.inputs if n)
        raise GraphError(f"node {node}: {_detail(str(e))} (inputs {types})") from None
    return {vi.name: tensor_type(vi.type) for vi in list(done.graph.value_info) + list(done.graph.output)
            if vi.type.WhichOneof("value")}


def _detail(message: str) -> str:
    """The useful part of an onnx inference error, without its wrapping prefixes."""
    text = " ".join(message.split())
    text = re.split(r"\(op_type:[^)]*\):", text)[-1]
    return re.sub(r"^\s*(\[\w+\]\s*)+", "", text).strip() or text


def merge_type(declared: TensorType, inferred: TensorType) -> TensorType | None:
    """The more precise of two types, or None when they contradict each other."""
    if declared.kind != "tensor" or inferred.kind != "tensor":
        return inferred if inferred.kind != "tensor" else declared
    if declared.dtype is not None and inferred.dtype is not None and declared.dtype != inferred.dtype:
        return None
    shape = declared.shape
    if declared.shape is not None and inferred.shape is not None:
        if len(declared.shape) != len(inferred.shape):
            return None
        dims = []
        for d, i in zip(declared.shape, inferred.shape):
            if isinstance(d, int) and isinstance(i, int) and d != i:
                return None
            dims.append(i if isinstance(i, int) or d is None else d)
        shape = tuple(dims)
    elif shape is None:
        shape = inferred.shape
    return TensorType(declared.dtype or inferred.dtype, shape)
