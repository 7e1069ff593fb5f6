"""A copy of a graph that passes may change, its constants shared."""

from __future__ import annotations

import copy

from graphexec._limits import gc_paused
from graphexec.ir.graph import Graph, Node, Value


def clone_graph(graph: Graph) -> Graph:
    """A copy whose nodes and values passes may change; constants are shared, not copied."""
    with gc_paused():   # thousands of small objects: a collection midway rescans the whole graph
        return _clone(graph)


def _clone(graph: Graph) -> Graph:
    g = copy.copy(graph)
    g.nodes = [Node(n.name, n.op, n.inputs, n.outputs, n.attrs, n.domain, n.implicit_inputs, n.proto, dict(n.meta))
               for n in graph.nodes]   # built directly: copy.copy of a slotted dataclass is 5x slower
    g.values = {k: Value(v.name, v.type, v.const) for k, v in graph.values.items()}
    g.meta = dict(graph.meta)
    return g
