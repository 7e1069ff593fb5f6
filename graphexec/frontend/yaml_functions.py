"""Model-local ONNX functions of a YAML graph (``onnx_functions``) inlined at load, as an ONNX
file's are (``onnx_functions.py``): each call becomes its body's nodes, so the body runs as
device tasks and the reference never sees a call. A call keeps its stream label and priority
on every node it expands to; a problem (a cycle, an undefined callee, a body that cannot be
converted) is placed at the calling node.
"""

from __future__ import annotations

from typing import Callable

import onnx
from onnx import helper as h

from graphexec.errors import ModelLoadError
from graphexec.frontend.onnx import node_from_proto
from graphexec.frontend.onnx_functions import inline_functions
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
        for j, proto in enumerate(model.graph.node):
            new = node_from_proto(j, proto)
            new.meta = dict(node.meta)
            index.setdefault(new.name, index.get(node.name, 0))
            nodes.append(new)
            for out in new.outputs:
                if out:
                    graph.value(out)
    graph.nodes = nodes
    graph.functions = []


def _may_call(n: onnx.NodeProto, domains: set[str]) -> bool:
    """A call into a function domain, or a node whose bodies may hold one."""
    return n.domain in domains or any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
                                      for a in n.attribute)
