"""ONNX attribute values to plain Python objects, for kernels."""

from __future__ import annotations

from typing import Any

import onnx
from onnx import numpy_helper

from graphexec.errors import ModelLoadError


def decode_attr(a: onnx.AttributeProto) -> Any:
    """One attribute as a Python value: str for strings, ndarray for tensors."""
    t = a.type
    A = onnx.AttributeProto
    if t == A.STRING:
        return a.s.decode("utf-8", errors="replace")
    if t == A.STRINGS:
        return [s.decode("utf-8", errors="replace") for s in a.strings]
    if t == A.TENSOR:
        return numpy_helper.to_array(a.t)
    if t == A.TENSORS:
        return [numpy_helper.to_array(x) for x in a.tensors]
    if t == A.INTS:
        return [int(v) for v in a.ints]
    if t == A.FLOATS:
        return [float(v) for v in a.floats]
    return onnx.helper.get_attribute_value(a)


def decode_attrs(node: onnx.NodeProto, attributes: list[onnx.AttributeProto] | None = None) -> dict[str, Any]:
    """All attributes of a node (``attributes``: its ``attribute`` field, read already),
    decoded; ``ref_attr_name`` ones are left to the fallback.

    Raises:
        ModelLoadError: an attribute cannot be decoded (a malformed tensor, an unknown type).
    """
    out = {}
    for a in node.attribute if attributes is None else attributes:
        if a.ref_attr_name:
            continue
        try:
            out[a.name] = decode_attr(a)
        except (ValueError, TypeError, KeyError) as e:
            raise ModelLoadError(f"node {node.name or node.op_type} ({node.op_type}): attribute {a.name!r} "
                                 f"is malformed: {e}") from None
    return out
