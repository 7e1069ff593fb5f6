"""Model-local ONNX functions of a YAML graph (``onnx_functions``) inlined at load, as an ONNX
file's are (``onnx_functions.py``): each call becomes its body's nodes, so the body runs as
device tasks and the reference never sees a call. A call keeps its stream label and priority
on every node it expands to; a problem (a cycle, an undefined callee, a body that cannot be
converted) is placed at the calling node. A SequenceMap is lowered to its Loop the same way
(``sequence_map.py``).
"""

from __future__ import annotations

from typing import Callable, Iterable

import onnx
from onnx import helper as h

from graphexec.errors import ModelLoadError
from graphexec.frontend.onnx import node_from_proto
from graphexec.frontend.onnx_functions import inline_functions
from graphexec.frontend.sequence_map import lowered
from graphexec.ir import Graph, Node

AddProblem = Callable[[tuple, str], None]


def inline_yaml_functions(graph: Graph, index: dict[str, int], add: AddProblem) -> None:
    """Expand every call of ``graph.functions`` among ``graph.nodes`` (subgraphs included), in place;
    ``index`` (node name to its place in the file) gains the expanded nodes at their call's place."""
    if not graph.functions:
        return
    domains = {f.domain for f in graph.functions}
    opsets = [h.make_opsetid(d, v) for d, v in graph.opsets.items()]
    nodes: list[Node] = []
    for node in graph.nodes:
        if node.proto is None or not _may_call(node.proto, domains):
            nodes.append(node)
            continue
        model = h.make_model(h.make_graph([node.proto], graph.name, [], []), opset_imports=opsets,
                             functions=graph.functions)
        try:
            inline_functions(model, graph.source)
        except ModelLoadError as e:
            add(("nodes", index.get(node.name, 0)), str(e))
            nodes.append(node)
            continue
        for o in model.opset_import:
            graph.opsets.setdefault("" if o.domain == "ai.onnx" else o.domain, o.version)
        nodes.extend(_expanded(graph, node, model.graph.node, index))
    graph.nodes = nodes
    graph.functions = []


def lower_yaml_sequence_maps(graph: Graph, index: dict[str, int]) -> None:
    """Each default-domain SequenceMap of ``graph.nodes`` replaced by its Loop, in place; its
    inputs' kinds are their declared ones (or the op that makes them)."""
    if not any(n.op == "SequenceMap" and not n.domain and n.proto is not None for n in graph.nodes):
        return
    kinds = {name: f"{v.type.kind}_type" for name, v in graph.values.items()
             if v.type.kind != "tensor" or v.type.dtype is not None or v.const is not None}
    made_by = {o: n.op for n in graph.nodes for o in n.outputs if o}
    nodes: list[Node] = []
    for k, node in enumerate(graph.nodes):
        protos = lowered(node.proto, k, kinds, made_by) if node.op == "SequenceMap" and not node.domain \
            and node.proto is not None else None
        if protos is None:
            nodes.append(node)
            continue
        nodes.extend(_expanded(graph, node, protos, index))
    graph.nodes = nodes


def _expanded(graph: Graph, node: Node, protos: Iterable[onnx.NodeProto], index: dict[str, int]) -> list[Node]:
    """The nodes ``node`` expands to: its meta (stream label, priority) on each, placed in the
    file at ``node``'s place, their outputs known to ``graph``."""
    out = []
    for j, proto in enumerate(protos):
        new = node_from_proto(j, proto)
        new.meta = dict(node.meta)
        index.setdefault(new.name, index.get(node.name, 0))
        out.append(new)
        for name in new.outputs:
            if name:
                graph.value(name)
    return out


def _may_call(n: onnx.NodeProto, domains: set[str]) -> bool:
    """A call into a function domain, or a node whose bodies may hold one."""
    return n.domain in domains or any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
                                      for a in n.attribute)
