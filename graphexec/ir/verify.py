"""Structural checks of a Graph, run by the frontends and between passes in tests."""

from __future__ import annotations

import networkx as nx

from graphexec.errors import GraphError
from graphexec.ir.graph import Graph


def dependency_graph(graph: Graph) -> nx.DiGraph:
    """Node-index DAG with an edge for every value passed from one node to another."""
    g = nx.DiGraph()
    g.add_nodes_from(range(len(graph.nodes)))
    prod = {o: i for i, n in enumerate(graph.nodes) for o in n.outputs if o}
    for j, n in enumerate(graph.nodes):
        for name in n.all_inputs:
            i = prod.get(name)
            if i is not None and i != j:
                g.add_edge(i, j)
            elif i == j:
                g.add_edge(i, j)
    return g


def _in_order(graph: Graph) -> bool:
    """Whether every node reads only values of nodes before it (as ONNX asks of a file):
    then the stable topological order is the order at hand, and no cycle exists."""
    prod = {o: i for i, n in enumerate(graph.nodes) for o in n.outputs if o}
    return all(prod.get(name, -1) < j for j, n in enumerate(graph.nodes) for name in n.all_inputs)


def topological_sort(graph: Graph) -> None:
    """Reorder ``graph.nodes`` topologically (stable), or raise GraphError naming a cycle."""
    if _in_order(graph):
        return
    g = dependency_graph(graph)
    try:
        order = list(nx.lexicographical_topological_sort(g))
    except nx.NetworkXUnfeasible:
        cycle = nx.find_cycle(g)
        names = " -> ".join(str(graph.nodes[a]) for a, _ in cycle)
        raise GraphError(f"{graph.source}: the graph has a cycle: {names} -> {graph.nodes[cycle[0][0]]}") from None
    graph.nodes = [graph.nodes[i] for i in order]


def verify(graph: Graph) -> None:
    """Check names are unique, every input is defined before use, outputs exist.

    Raises:
        GraphError: naming the node or value at fault and what to fix.
    """
    where = graph.source
    defined = set(graph.inputs) | {n for n, v in graph.values.items() if v.const is not None}
    for name in graph.inputs:
        if graph.values.get(name) is not None and graph.values[name].const is not None:
            raise GraphError(f"{where}: graph input {name!r} is also a constant")
    seen_outputs: set[str] = set()
    for node in graph.nodes:
        for name in node.all_inputs:
            if name not in defined:
                raise GraphError(f"{where}: node {node} reads {name!r}, which no node, input or initializer produces")
        for name in node.outputs:
            if not name:
                continue
            if name in seen_outputs or name in graph.inputs:
                raise GraphError(f"{where}: value {name!r} is written twice (again by node {node})")
            seen_outputs.add(name)
            defined.add(name)
    for name in graph.outputs:
        if name not in defined:
            raise GraphError(f"{where}: graph output {name!r} is not produced by any node, input or initializer")
