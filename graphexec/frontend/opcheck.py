"""Checks of one node against what exists: its op, its opset, its attributes.

Shared by the YAML loader (which collects every problem) and the builder (which
raises on the first), so both say the same thing about the same mistake.
"""

from __future__ import annotations

import difflib
import functools
import re
from typing import Any, Callable

import numpy as np
import onnx
from onnx import helper

from graphexec.errors import ModelLoadError
from graphexec.frontend.const_rules import known_values_problem
from graphexec.frontend.onnx import node_from_proto
from graphexec.frontend.onnx_checks import schema_problem
from graphexec.ir import Graph, Node
from graphexec.ir.onnx_proto import node_proto
from graphexec.kernels import registry
from graphexec.kernels.custom import domains_of, lookup_custom

Issue = tuple[tuple[str, ...], str]  # (field of the node at fault, message)


def make_node(i: int, graph: Graph, name: str, op: str, domain: str | None, inputs: list[str],
              outputs: list[str], attrs: dict[str, Any], meta: dict[str, Any]) -> tuple[Node, list[Issue]]:
    """The i-th node of ``graph``, checked, with its problems.

    Its domain is resolved, its op must exist at the graph's opset and its attributes be
    valid; a new domain's opset goes into ``graph.opsets``.
    """
    domain, problem = resolve_domain(op, domain, graph.opsets[""])
    node = Node(name, op, inputs, outputs, attrs, domain, meta=meta)
    if domain and domain not in graph.opsets:
        graph.opsets[domain] = default_opset(domain)
    issues: list[Issue] = [(("op",), p) for p in (problem, op_problem(node, graph)) if p]
    node, more = finish_node(i, node, graph)
    return node, issues + more


def resolve_domain(op: str, domain: str | None, opset: int) -> tuple[str, str | None]:
    """The node's domain and a problem, if any.

    A bare op is the ONNX one when the graph's opset has it, else the custom kernel's
    (``Swish`` is a custom kernel at opset 17 and the ONNX op from opset 24).
    """
    if domain is not None:
        return ("" if domain == "ai.onnx" else domain), None
    first = _first_versions().get(("", op))
    found = domains_of(op)
    if (first is not None and first <= opset) or registry.lookup(op, "") or not found:
        return "", None
    if len(found) > 1:
        return found[0], f"op {op!r} is defined in custom domains {', '.join(found)}; give a domain"
    return found[0], None


@functools.cache
def _first_versions() -> dict[tuple[str, str], int]:
    """(domain, op) -> the first opset that has the op, over every ONNX schema."""
    first: dict[tuple[str, str], int] = {}
    for s in onnx.defs.get_all_schemas_with_history():
        key = (s.domain, s.name)
        first[key] = min(first.get(key, s.since_version), s.since_version)
    return first


def default_opset(domain: str) -> int:
    """The newest opset of an ONNX domain; 1 for a custom domain."""
    return max((s.since_version for s in onnx.defs.get_all_schemas_with_history() if s.domain == domain), default=1)


def op_problem(node: Node, graph: Graph) -> str | None:
    """Why the node's op cannot run (unknown, or not in the graph's opset), with the closest names."""
    if lookup_custom(node.op, node.domain) or any(f.name == node.op and f.domain == node.domain
                                                   for f in graph.functions):
        return None
    first = _first_versions().get((node.domain, node.op))
    if first is not None:
        version = graph.opsets.get(node.domain, 1)
        return f"node {node}: op {node.op!r} is not in opset {version} (it exists from opset {first})" \
            if version < first else None
    if registry.lookup(node.op, node.domain):
        return None
    where = f" in domain {node.domain!r}" if node.domain else ""
    # the ops of the node's own domain: a contrib op is no hint for a standard one
    ops = [*_first_versions(), *registry.registered_ops()]
    known = sorted({op for domain, op in ops if domain == node.domain})
    close = difflib.get_close_matches(node.op, known, n=3)
    hint = f"closest known: {', '.join(close)}" if close else "no ONNX op or registered kernel has a similar name"
    return f"node {node.name!r}: unknown op {node.op!r}{where}; {hint}"


def finish_node(i: int, node: Node, graph: Graph) -> tuple[Node, list[Issue]]:
    """The node made through a NodeProto, exactly as an ONNX file's node is, plus its attribute problems.

    Ints given where the schema wants floats (``alpha: 1``) become floats, as the author meant.
    """
    issues: list[Issue] = []
    schema = _schema(node, graph)
    if schema is not None:
        for key in list(node.attrs):
            if key not in schema.attributes:
                issues.append((("attributes", key), f"node {node}: unknown attribute {key!r}; {node.op} has: "
                                                     f"{', '.join(sorted(schema.attributes)) or 'none'}"))
                del node.attrs[key]
            else:
                node.attrs[key] = _coerce(node.attrs[key], schema.attributes[key].type)
                problem = attr_type_problem(node.attrs[key], schema.attributes[key].type)
                if problem:
                    issues.append((("attributes", key), f"node {node}: attribute {key!r} {problem}"))
                    del node.attrs[key]
        issues += [((), f"node {node}: missing required attribute {key!r}")
                   for key, a in schema.attributes.items() if a.required and key not in node.attrs]
    try:
        full = node_from_proto(i, _proto(node, schema))
    except (TypeError, ValueError) as e:
        return node, issues + [(("attributes",), f"node {node}: attributes cannot be encoded as ONNX: {e}")]
    except ModelLoadError as e:  # subgraphs nested too deep
        return node, issues + [(("attributes",), str(e))]
    problem = schema_problem(full.proto, graph.opsets) or known_values_problem(full, graph.values)
    if problem and not issues:
        attr = re.match(r"attribute '([^']+)'", problem)   # an attribute's rule: point at that attribute
        issues.append((("attributes", attr.group(1)) if attr else ("inputs",), f"node {full} {problem}"))
    full.meta = node.meta
    return full, issues


def _proto(node: Node, schema: Any) -> onnx.NodeProto:
    """``node_proto``, with each empty list typed by its YAML tag, the schema, or else as ints."""
    empty = {k: v for k, v in node.attrs.items() if isinstance(v, list) and not v}
    proto = node_proto(Node(node.name, node.op, node.inputs, node.outputs,
                            {k: v for k, v in node.attrs.items() if k not in empty}, node.domain))
    for key, value in empty.items():
        declared = schema.attributes[key].type.value if schema is not None and key in schema.attributes else None
        kind = getattr(value, "attr_type", None) or declared or onnx.AttributeProto.INTS
        proto.attribute.append(helper.make_attribute(key, [], attr_type=kind))
    return proto


def _schema(node: Node, graph: Graph) -> Any:
    try:
        return onnx.defs.get_schema(node.op, graph.opsets.get(node.domain, 1), node.domain)
    except (onnx.defs.SchemaError, TypeError):  # TypeError: a version past int32
        return None


def _coerce(value: Any, attr_type: Any) -> Any:
    A = onnx.defs.OpSchema.AttrType
    if attr_type == A.FLOAT and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if attr_type == A.FLOATS and isinstance(value, list):
        return [float(v) if isinstance(v, int) and not isinstance(v, bool) else v for v in value]
    return value


def _is_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer))  # a bool too: ``keepdims: true`` means 1


def _is_number(v: Any) -> bool:
    return _is_int(v) or isinstance(v, (float, np.floating))


_A = onnx.defs.OpSchema.AttrType
_ATTR_CHECKS: dict[Any, tuple[Callable[[Any], bool], str]] = {
    _A.INT: (_is_int, "an int"),
    _A.FLOAT: (_is_number, "a number"),
    _A.STRING: (lambda v: isinstance(v, (str, bytes)), "a string"),
    _A.INTS: (lambda v: isinstance(v, (list, tuple)) and all(map(_is_int, v)), "a list of ints"),
    _A.FLOATS: (lambda v: isinstance(v, (list, tuple)) and all(map(_is_number, v)), "a list of numbers"),
    _A.STRINGS: (lambda v: isinstance(v, (list, tuple)) and all(isinstance(x, (str, bytes)) for x in v),
                 "a list of strings"),
    _A.TENSOR: (lambda v: isinstance(v, np.ndarray), "a tensor ({tensor: {dtype, shape, value}})"),
    _A.GRAPH: (lambda v: isinstance(v, onnx.GraphProto), "a graph ({graph: BASE64})"),
}


def attr_type_problem(value: Any, attr_type: Any) -> str | None:
    """Why ``value`` cannot be an attribute of the schema's ``attr_type``, or None when it can."""
    check = _ATTR_CHECKS.get(attr_type)
    if check is None or check[0](value):
        return None
    text = repr(value)
    return f"must be {check[1]}, not {text if len(text) <= 40 else text[:37] + '...'}"
