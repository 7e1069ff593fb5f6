"""Graph fusion as GE/ATC does it: groups of nodes the device runs as one kernel.

ATC's fusion engine (FE) rewrites the graph before it is split into tasks, in two
kinds of rules (see ``fusion_switch.py`` for the ones implemented, by GE's names):
graph fusion replaces a subgraph by a cheaper one (a BatchNormalization folded into
the Conv before it; the LayerNorm and GELU subgraphs of exported transformers become
one op), and UB fusion compiles a head op and the elementwise ops after it into one
TBE kernel whose intermediates stay in the unified buffer (Conv + Add + Relu residual
tails, MatMul + bias + activation, chains of elementwise ops).

Here a fused group becomes one node of the ``graphexec.fused`` domain that keeps its
members (``meta["members"]``): lowering makes one task of it, priced as the fused
kernel (``kernels/fused.py``), and its runner computes the members in order, so the
outputs are the unfused graph's. A group never hides a value anyone else reads: every
value made inside it but its outputs is read only inside it and is no graph output.
Fusion runs in graph mode only and leaves a YAML graph's hand-written schedule alone
(it names the nodes).
"""

from __future__ import annotations

from dataclasses import replace

from graphexec import _switch
from graphexec.ir import Graph
from graphexec.passes.base import CompileState, Pass, PassResult
from graphexec.passes.fusion_groups import View, run_rule
from graphexec.passes.fusion_patterns import HEADS, RULE_MATCHERS


def fuse_graph(graph: Graph, off: frozenset[str]) -> dict[str, int]:
    """Run every rule not in ``off``, in GE's order; how many groups each fused."""
    counts: dict[str, int] = {}
    view: View | None = None   # the graph's readers and producers: made again only after a rule fused
    fast = _switch.fast()   # offer each rule only the nodes of its head ops (plain: every node)
    for rule, matcher, build in RULE_MATCHERS:
        if rule not in off:
            view = view or View(graph)
            n = run_rule(graph, matcher, build, view, HEADS[rule] if fast else None)
            if n:
                counts[rule] = counts.get(rule, 0) + n
                view = None
    return counts


class GraphFusion(Pass):
    """Fuses what GE's fusion rules fuse (graph mode, ``options.fusion``)."""

    name = "graph_fusion"

    def call(self, state: CompileState) -> PassResult:
        opts, graph = state.options, state.graph
        if not opts.fusing or "schedule" in graph.meta or opts.policy == "manual":
            return PassResult(state, False)
        counts = fuse_graph(graph, opts.fusion_off)
        if not counts:
            return PassResult(state, False)
        graph.meta["fusion"] = counts
        return PassResult(replace(state, graph=graph), True)
