"""The in-order shortcut of ``topological_sort`` gives networkx's stable order (the plain
path) on random DAGs whose nodes come in a random order, in order or not."""

from __future__ import annotations

import networkx as nx
from hypothesis import given, settings
from hypothesis import strategies as st

from graphexec.ir import Graph, Node
from graphexec.ir.verify import _in_order, dependency_graph, topological_sort


@st.composite
def shuffled_dags(draw: st.DrawFn) -> Graph:
    n = draw(st.integers(1, 12))
    g = Graph("g")
    g.inputs.append("x")
    nodes = []
    for i in range(n):
        srcs = draw(st.lists(st.integers(-1, i - 1), min_size=1, max_size=3)) if i else [-1]
        nodes.append(Node(f"n{i}", "Add", ["x" if s < 0 else f"v{s}" for s in srcs], [f"v{i}"]))
    g.nodes = draw(st.permutations(nodes)) if draw(st.booleans()) else nodes
    return g


@given(shuffled_dags())
@settings(max_examples=200, deadline=None)
def test_stable_order_equals_networkx(graph: Graph) -> None:
    expect = [graph.nodes[i].name for i in nx.lexicographical_topological_sort(dependency_graph(graph))]
    topological_sort(graph)
    assert [n.name for n in graph.nodes] == expect
    assert _in_order(graph)


def test_a_self_loop_is_not_in_order() -> None:
    g = Graph("g")
    g.nodes = [Node("a", "Relu", ["v"], ["v"])]
    assert not _in_order(g)
