"""IR to and from ONNX protos: for loading, shape inference, the reference fallback and export."""

from __future__ import annotations

import functools
from typing import Sequence

import numpy as np
import onnx
from onnx import helper, numpy_helper

from graphexec.errors import ModelLoadError
from graphexec.ir.graph import Graph, Node, TensorType


def value_info(name: str, t: TensorType | None) -> onnx.ValueInfoProto:
    """A ValueInfoProto for a tensor type; unknown dtype or shape stay blank."""
    if t is None or t.kind != "tensor" or t.dtype is None:
        return onnx.ValueInfoProto(name=name)
    try:
        elem = helper.np_dtype_to_tensor_dtype(t.dtype)
    except (KeyError, TypeError, ValueError):
        return onnx.ValueInfoProto(name=name)
    shape = None if t.shape is None else [d if d is not None else None for d in t.shape]
    return helper.make_tensor_value_info(name, elem, shape)


def node_proto(node: Node) -> onnx.NodeProto:
    """The node as ONNX: its original proto when it has one."""
    if node.proto is not None:
        return node.proto
    attrs = {k: v for k, v in node.attrs.items() if v is not None}
    for k, v in attrs.items():
        if isinstance(v, np.ndarray):
            attrs[k] = numpy_helper.from_array(v)
    return helper.make_node(node.op, node.inputs, node.outputs, name=node.name, domain=node.domain, **attrs)


def to_onnx(graph: Graph, input_types: dict[str, TensorType] | None = None,
            nodes: Sequence[Node] | None = None, with_constants: bool = True) -> onnx.ModelProto:
    """A ModelProto of ``graph`` (or of a subset of its nodes), inputs typed as given."""
    input_types = input_types or {}
    inits = []
    if with_constants:
        inits = [numpy_helper.from_array(np.asarray(v), n) for n, v in graph.constants.items()]
    inputs = [value_info(n, input_types.get(n, graph.values[n].type)) for n in graph.inputs]
    outputs = [value_info(n, graph.values[n].type if n in graph.values else None) for n in graph.outputs]
    g = helper.make_graph([node_proto(n) for n in (graph.nodes if nodes is None else nodes)],
                          graph.name, inputs, outputs, inits)
    opsets = [helper.make_opsetid(d, v) for d, v in sorted(graph.opsets.items())]
    model = helper.make_model(g, opset_imports=opsets, functions=graph.functions)
    model.ir_version = min(model.ir_version, onnx.IR_VERSION)
    return model


@functools.lru_cache(maxsize=None)
def _np_dtype(elem_type: int) -> np.dtype:
    """numpy's dtype of an ONNX element type (cached: a model's values share a handful)."""
    try:
        return np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem_type))
    except (KeyError, TypeError):
        raise ModelLoadError(f"element type {elem_type} is not one onnx knows") from None


def tensor_type(tp: onnx.TypeProto) -> TensorType:
    """TypeProto to TensorType; unknown parts stay None, an element type onnx does not know is an error."""
    which = tp.WhichOneof("value")
    if which == "tensor_type":
        tt = tp.tensor_type
        dtype = _np_dtype(tt.elem_type) if tt.elem_type else None
        shape = None
        if tt.HasField("shape"):
            # a dim_value of -1 and a dim_param "?" (Paddle2ONNX's dynamic dims) are unknown,
            # not one shared symbol, as onnxruntime reads them
            shape = tuple(d.dim_value if d.HasField("dim_value") and d.dim_value >= 0
                          else None if d.dim_param in ("", "?") else d.dim_param for d in tt.shape.dim)
        return TensorType(dtype, shape)
    if which in ("sequence_type", "optional_type", "map_type"):
        return TensorType(kind=which.removesuffix("_type"))
    return TensorType()
