"""A validated GraphSpec to the IR, collecting every problem on the way.

Each step records what is wrong and carries on with what it can, so one run of
``graphexec validate`` lists every problem of a file, each at its own field.
"""

from __future__ import annotations

import base64
import difflib
from pathlib import Path as FsPath
from typing import Any

import onnx

from graphexec._files import inside
from graphexec.frontend.opcheck import make_node
from graphexec.frontend.options import plain_schedule, settle_options
from graphexec.frontend.provenance import record
from graphexec.frontend.yaml_functions import inline_yaml_functions, lower_yaml_sequence_maps
from graphexec.frontend.yaml_schema import GraphSpec, NodeSpec
from graphexec.frontend.yaml_source import Path, Problem, Source
from graphexec.frontend.yaml_tensors import constant, decode_attr, tensor_type
from graphexec.ir import Graph, TensorType, Value


class Collector:
    """Problems of one file, each placed at the field it is about."""

    def __init__(self, src: Source) -> None:
        self.src = src
        self.problems: list[Problem] = []

    def add(self, path: Path, message: str) -> None:
        self.problems.append(self.src.problem(path, message))


def build(spec: GraphSpec, out: Collector, base: FsPath) -> tuple[Graph, dict[str, int]]:
    """The IR of ``spec`` (possibly incomplete where ``out`` has problems) and each node's index."""
    opsets = {"": spec.opset or onnx.defs.onnx_opset_version(), **spec.opsets}
    if opsets[""] > onnx.defs.onnx_opset_version():
        out.add(("opset",), f"opset {opsets['']} is newer than the installed onnx knows "
                            f"({onnx.defs.onnx_opset_version()})")
    graph = Graph(spec.name, opsets=opsets, source=out.src.file)
    graph.functions = _functions(spec, out)
    _tensors(spec, graph, out, base)
    index = _nodes(spec, graph, out)
    _undefined(spec, graph, out)
    inline_yaml_functions(graph, index, out.add)
    lower_yaml_sequence_maps(graph, index)
    graph.outputs = list(spec.outputs)
    if spec.schedule is not None:
        graph.meta["schedule"] = plain_schedule(spec.schedule)
    if spec.options is not None:
        graph.meta["options"], problems = settle_options(spec.options, base)
        for path, message in problems:
            out.add(path, message)
    if spec.description:
        graph.meta["description"] = spec.description
    return graph, index


def _functions(spec: GraphSpec, out: Collector) -> list[onnx.FunctionProto]:
    funcs = []
    for i, text in enumerate(spec.onnx_functions):
        try:
            funcs.append(onnx.FunctionProto.FromString(base64.b64decode(text, validate=True)))
        except Exception:  # noqa: BLE001  (binascii and protobuf errors)
            out.add(("onnx_functions", i), "not a base64-encoded ONNX FunctionProto")
    return funcs


def _tensors(spec: GraphSpec, graph: Graph, out: Collector, base: FsPath) -> None:
    for name, t in spec.tensors.items():
        field, arr, problem = constant(name, t, base)
        if problem:
            out.add(("tensors", name, field), problem)
        elif t.file is not None:  # what the model read: outputs may not replace it
            record(graph, str(inside(base, t.file)))
        try:
            declared = tensor_type(t) if arr is None else TensorType(arr.dtype, arr.shape)
        except ValueError as e:   # a container type not in ONNX's notation
            out.add(("tensors", name, "type"), str(e))
            declared = TensorType(kind=t.kind)
        graph.values[name] = Value(name, declared, arr)
    for i, name in enumerate(spec.inputs):
        v = graph.values.get(name)
        if v is None:
            out.add(("inputs", i), f"input {name!r} is not declared under tensors; give its dtype and shape there")
            graph.values[name] = Value(name)
        elif v.const is not None:
            out.add(("inputs", i), f"input {name!r} has a value; an input is fed at run time")
        elif v.type.kind == "tensor" and v.type.dtype is None:
            out.add(("tensors", name), f"input {name!r} needs a dtype")
        if name in graph.inputs:
            out.add(("inputs", i), f"input {name!r} is listed twice")
        else:
            graph.inputs.append(name)


def _nodes(spec: GraphSpec, graph: Graph, out: Collector) -> dict[str, int]:
    index: dict[str, int] = {}
    written = {n: "an input" for n in graph.inputs} | {n: "a constant" for n in graph.constants}
    for i, ns in enumerate(spec.nodes):
        name = ns.name or f"{ns.op}_{i}"
        if name in index:
            first = out.src.marks.get(("nodes", index[name]), (0, 0))[0]
            out.add(("nodes", i, "name"), f"node name {name!r} is used twice (first at line {first})")
        index.setdefault(name, i)
        meta = {k: v for k, v in (("stream_label", ns.stream_label), ("priority", ns.priority)) if v is not None}
        node, issues = make_node(i, graph, name, ns.op, ns.domain, list(ns.inputs), list(ns.outputs),
                                 _attributes(name, ns, i, out), meta)
        for field, message in issues:
            out.add(("nodes", i, *field), message)
        for j, o in enumerate(node.outputs):
            if o and o in written:
                out.add(("nodes", i, "outputs", j), f"node {node} writes {o!r}, which is already {written[o]}")
            elif o:
                written[o] = f"written by node {node}"
                graph.value(o)
        graph.nodes.append(node)
    return index


def _attributes(name: str, ns: NodeSpec, i: int, out: Collector) -> dict[str, Any]:
    attrs = {}
    for key, raw in ns.attributes.items():
        try:
            attrs[key] = decode_attr(raw)
        except Exception as e:  # noqa: BLE001  (pydantic, base64, protobuf, numpy)
            out.add(("nodes", i, "attributes", key), f"node {name} ({ns.op}): attribute {key!r}: {_first_line(e)}")
    return attrs


def _first_line(e: Exception) -> str:
    return str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__


def _undefined(spec: GraphSpec, graph: Graph, out: Collector) -> None:
    """Names read but never made, with the closest names that are."""
    sourced = {n for n, t in spec.tensors.items() if t.value is not None or t.file or t.random}
    made = set(graph.inputs) | sourced | {o for n in graph.nodes for o in n.outputs if o}
    for i, (ns, node) in enumerate(zip(spec.nodes, graph.nodes)):
        for j, name in enumerate(ns.inputs):
            if name and name not in made:
                out.add(("nodes", i, "inputs", j), f"node {node} reads {name!r}, which no node, input or "
                                                   f"tensor defines{_did_you_mean(name, made)}")
    for i, name in enumerate(spec.outputs):
        if name not in made:
            out.add(("outputs", i), f"graph output {name!r} is not made by any node, input or tensor"
                                    f"{_did_you_mean(name, made)}")
    for name in spec.tensors:
        if name not in made and name not in spec.inputs:
            out.add(("tensors", name), f"tensor {name!r} has no value and is neither an input nor made by a node")


def _did_you_mean(name: str, names: set[str]) -> str:
    close = difflib.get_close_matches(name, sorted(names), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""
