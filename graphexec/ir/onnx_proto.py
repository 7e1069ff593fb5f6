"""IR to and from ONNX protos: for loading, shape inference, the reference fallback and export."""

from __future__ import annotations

import functools
import itertools
from typing import Iterable, Iterator, Sequence

import numpy as np
import onnx
from onnx import helper, numpy_helper

from graphexec.errors import ModelLoadError
from graphexec.ir.graph import Graph, Node, TensorType


def value_info(name: str, t: TensorType | None, containers: bool = False) -> onnx.ValueInfoProto:
    """A ValueInfoProto for a tensor type; unknown dtype or shape stay blank. ``containers``:
    a sequence, map or optional of known type is written with it (for export; the fallback and
    shape inference keep them blank, as they always had them)."""
    if containers and t is not None and t.kind != "tensor" and t.elem:
        return helper.make_value_info(name, type_proto(t.elem))
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
            nodes: Sequence[Node] | None = None, with_constants: bool = True,
            containers: bool = False) -> onnx.ModelProto:
    """A ModelProto of ``graph`` (or of a subset of its nodes), inputs typed as given;
    ``containers``: graph inputs and outputs of container types typed too (``value_info``)."""
    input_types = input_types or {}
    inits = []
    if with_constants:
        inits = [numpy_helper.from_array(np.asarray(v), n) for n, v in graph.constants.items()]
    inputs = [value_info(n, input_types.get(n, graph.values[n].type), containers) for n in graph.inputs]
    outputs = [value_info(n, graph.values[n].type if n in graph.values else None, containers)
               for n in graph.outputs]
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
        return TensorType(kind=which.removesuffix("_type"), elem=type_text(tp))
    return TensorType()


_ELEMS = {"seq": "sequence_type", "optional": "optional_type"}


def type_text(tp: onnx.TypeProto) -> str | None:
    """A type in ONNX's notation (``seq(map(int64,tensor(float)))``); None where a part is unknown."""
    which = tp.WhichOneof("value")
    if which == "tensor_type":
        return _scalar_text(tp.tensor_type.elem_type)
    if which in ("sequence_type", "optional_type"):
        inner = type_text(getattr(tp, which).elem_type)
        return None if inner is None else f"{'seq' if which == 'sequence_type' else 'optional'}({inner})"
    if which == "map_type":
        key, value = _scalar_text(tp.map_type.key_type), type_text(tp.map_type.value_type)
        return None if key is None or value is None else f"map({key.removeprefix('tensor(')[:-1]},{value})"
    return None


def _scalar_text(elem_type: int) -> str | None:
    if not elem_type:
        return None
    try:
        name = onnx.helper.tensor_dtype_to_string(elem_type).removeprefix("TensorProto.").lower()
    except (KeyError, ValueError):
        return None
    return f"tensor({name})"


def type_proto(text: str) -> onnx.TypeProto:
    """The TypeProto of a type in ONNX's notation (``type_text``'s inverse); ValueError if malformed."""
    text = text.replace(" ", "")
    head, _, rest = text.partition("(")
    if not rest.endswith(")"):
        raise ValueError(f"type {text!r} is not in ONNX's notation, e.g. seq(tensor(float))")
    inner = rest[:-1]
    if head == "tensor":
        return helper.make_tensor_type_proto(_elem_type(inner), None)
    if head in _ELEMS:
        elem = type_proto(inner)
        return helper.make_sequence_type_proto(elem) if head == "seq" else helper.make_optional_type_proto(elem)
    if head == "map":
        key, _, value = inner.partition(",")
        return helper.make_map_type_proto(_elem_type(key), type_proto(value))
    raise ValueError(f"type {text!r}: {head!r} is none of tensor, seq, map, optional")


def _elem_type(name: str) -> int:
    try:
        return int(getattr(onnx.TensorProto, name.upper()))
    except AttributeError:
        raise ValueError(f"element type {name!r} is not one ONNX knows") from None


def all_nodes(nodes: Iterable[onnx.NodeProto]) -> Iterator[onnx.NodeProto]:
    """Every node of ``nodes`` and, depth first, of the subgraphs their attributes hold (recursive:
    callers check the nesting depth first)."""
    for n in nodes:
        yield n
        for g in subgraphs(n):
            yield from all_nodes(g.node)


def has_nodes(graph: onnx.GraphProto, count: int) -> bool:
    """Whether ``graph`` holds ``count`` nodes or more, its subgraphs' included; walks at most
    ``count`` of them."""
    return next(itertools.islice(all_nodes(graph.node), count - 1, None), None) is not None


def subgraphs(n: onnx.NodeProto) -> Iterator[onnx.GraphProto]:
    """The graphs ``n``'s attributes hold (If's branches, Loop's and Scan's bodies, ...)."""
    for a in n.attribute:
        if a.type == onnx.AttributeProto.GRAPH:
            yield a.g
        elif a.type == onnx.AttributeProto.GRAPHS:
            yield from a.graphs
