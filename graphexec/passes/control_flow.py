"""Which control-flow nodes run on the device as a control task (GE's stream switch and
label goto) rather than as one opaque AI CPU task through the reference.

A node qualifies when every value it and its bodies pass across the boundary is a
tensor: sequences, optionals and maps live on the host, so a body carrying one stays with
the reference.
"""

from __future__ import annotations

from typing import Any

import onnx

from graphexec.ir import Graph, Node

_CARRIED = ("tensor", "sequence", "optional")   # what a body may carry: host values ride along
CONTROL_OPS = {"If": ("then_branch", "else_branch"), "Loop": ("body",), "Scan": ("body",)}


def body_attrs(node: Node) -> tuple[str, ...]:
    """The attributes holding the node's bodies, in the order the controller uses them."""
    return CONTROL_OPS.get(node.op, ())


def runs_on_device(node: Node, graph: Graph) -> bool:
    """Whether ``node`` lowers to a control task whose bodies run as device tasks."""
    if node.domain or node.op not in CONTROL_OPS:
        return False
    names = [n for n in node.all_inputs + node.outputs if n]
    if any(graph.values[n].type.kind not in _CARRIED for n in names if n in graph.values):
        return False
    return all(isinstance(node.attrs.get(a), onnx.GraphProto) and _tensors_only(node.attrs[a])
               for a in body_attrs(node))


def _tensors_only(body: onnx.GraphProto) -> bool:
    return all(_is_tensor(vi.type) for vi in [*body.input, *body.output])


def _is_tensor(tp: Any) -> bool:
    return tp.WhichOneof("value") in (None, "tensor_type", "sequence_type", "optional_type")
