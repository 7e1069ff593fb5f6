"""Whole-graph checks of a YAML graph: cycles, the hand-written schedule, and types."""

from __future__ import annotations

import networkx as nx

from graphexec.errors import GraphExecError
from graphexec.frontend.infer import infer_node, merge_type
from graphexec.frontend.yaml_build import Collector
from graphexec.frontend.yaml_schedule import NodeRef, check_schedule
from graphexec.ir import Graph
from graphexec.ir.verify import dependency_graph


def check_graph(graph: Graph, index: dict[str, int], declared: set[str], out: Collector, types: bool) -> None:
    """Order the nodes and check the schedule and the types, adding each problem to ``out``.

    Args:
        index: node name -> its position in the file, for placing problems.
        declared: names whose type the file declares, checked against inference.
        types: infer types too (only worth it on a graph with no problem so far).
    """
    if not _sort(graph, index, out):
        return
    if "schedule" in graph.meta:
        nodes = [NodeRef(n.name, n.meta.get("stream_label"), ("nodes", index[n.name])) for n in graph.nodes]
        for path, message in check_schedule(graph.meta["schedule"], nodes, data_deps(graph)):
            out.add(path, message)
    if types:
        _types(graph, index, declared, out)


def data_deps(graph: Graph) -> list[tuple[str, str, str]]:
    """(producer, consumer, value) for every value one node passes to another."""
    made = graph.producers()
    deps = []
    for node in graph.nodes:
        for name in dict.fromkeys(node.all_inputs):
            if name in made and made[name] is not node:
                deps.append((made[name].name, node.name, name))
    return deps


def _sort(graph: Graph, index: dict[str, int], out: Collector) -> bool:
    """Topologically order ``graph.nodes`` (stable); a cycle is a problem naming its nodes.

    A value written twice (already a problem) would make up cycles, so nothing is sorted then.
    """
    outputs = [o for n in graph.nodes for o in n.outputs if o]
    if len(outputs) != len(set(outputs)):
        return False
    g = dependency_graph(graph)
    try:
        order = list(nx.lexicographical_topological_sort(g))
    except nx.NetworkXUnfeasible:
        cycle = [a for a, _ in nx.find_cycle(g)]
        names = " -> ".join(str(graph.nodes[a]) for a in cycle + cycle[:1])
        out.add(("nodes", index[graph.nodes[cycle[0]].name]), f"the graph has a cycle: {names}")
        return False
    graph.nodes = [graph.nodes[i] for i in order]
    return True


def _types(graph: Graph, index: dict[str, int], declared: set[str], out: Collector) -> None:
    """Type every node in order; a node that cannot take its inputs, or a clash with a declared type, is a problem."""
    failed: set[str] = set()
    for node in graph.nodes:
        if failed.intersection(node.all_inputs):  # already reported upstream
            failed.update(node.outputs)
            continue
        try:
            types = infer_node(graph, node)
        except GraphExecError as e:
            out.add(("nodes", index[node.name]), str(e))
            failed.update(node.outputs)
            continue
        for name, t in zip(node.outputs, types):
            if not name:
                continue
            v = graph.values[name]
            merged = merge_type(v.type, t)
            if merged is None:
                path = ("tensors", name) if name in declared else ("nodes", index[node.name])
                out.add(path, f"tensor {name!r} is declared {v.type} but node {node} makes {t}")
            else:
                v.type = merged
