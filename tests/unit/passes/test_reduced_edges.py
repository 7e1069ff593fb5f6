"""The stream policies' own transitive reduction (linear on a chain, where networkx's is
quadratic) equals networkx's on random DAGs, ids in any order."""

from __future__ import annotations

import networkx as nx
from hypothesis import given, settings
from hypothesis import strategies as st

from graphexec.passes.stream_policies import reduced_edges


class _Tasks:   # what reduced_edges reads of a TaskGraph: task ids and deps
    def __init__(self, n: int, edges: set[tuple[int, int]]) -> None:
        self.tasks = [type("T", (), {"id": i})() for i in range(n)]
        self.deps = {c: {p for p, c2 in edges if c2 == c} for c in range(n)}


@st.composite
def dags(draw):
    n = draw(st.integers(1, 30))
    pairs = [(p, c) for c in range(n) for p in range(c)]
    edges = draw(st.sets(st.sampled_from(pairs), max_size=80)) if pairs else set()
    perm = draw(st.permutations(range(n)))   # ids need not be topological
    return n, {(perm[p], perm[c]) for p, c in edges}


@settings(max_examples=300, deadline=None)
@given(dags())
def test_equals_networkx(dag):
    n, edges = dag
    g = nx.DiGraph()
    g.add_nodes_from(range(n))
    g.add_edges_from(edges)
    want = sorted(nx.transitive_reduction(g).edges)
    assert reduced_edges(_Tasks(n, edges)) == want   # type: ignore[arg-type]


@settings(max_examples=100, deadline=None)
@given(dags())
def test_chain_matching_equals_networkx(dag):
    """The chains policy's own Hopcroft-Karp finds networkx's matching, edge for edge (the
    same visiting order), so the chains and the streams are the same."""
    from graphexec.passes.stream_policies import _matching, _nx_matching

    n, edges = dag
    reduced = reduced_edges(_Tasks(n, edges))   # type: ignore[arg-type]
    assert _matching(list(range(n)), reduced) == _nx_matching(list(range(n)), reduced)


def test_chain_matching_on_a_layered_graph_equals_networkx():
    """Four lanes that read each other's latest values (benchmarks/compile_scale.py's graph)."""
    from graphexec.passes.stream_policies import _matching, _nx_matching

    lanes, latest, edges = 4, [None] * 4, set()
    for k in range(800):
        lane = k % lanes
        reads = [latest[lane], latest[(lane + 1) % lanes]] if (k // lanes) % 4 < 2 else [latest[lane]]
        edges.update((p, k) for p in reads if p is not None)
        latest[lane] = k
    reduced = reduced_edges(_Tasks(800, edges))   # type: ignore[arg-type]
    assert _matching(list(range(800)), reduced) == _nx_matching(list(range(800)), reduced)
