"""Fusion groups: what a matcher found, the view of the graph it asks, and the rewrite
that turns a group into one node (see ``graph_fusion.py`` for why)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from graphexec.ir import Graph, Node
from graphexec.kernels import registry
from graphexec.kernels.fused import FUSED_DOMAIN, is_fused


@dataclass(frozen=True)
class Match:
    """A group to fuse: its nodes in graph order (the last one's outputs are the group's)
    and the fused op type shown in the plan, trace and op_summary."""

    rule: str
    nodes: tuple[Node, ...]
    op: str = ""


class View:
    """What the matchers ask of the graph: producers, readers, constants, kernels."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.users = graph.consumers()
        self.producer = graph.producers()
        self.outputs = set(graph.outputs)
        self.opset = graph.opsets.get("", 1)
        # node id -> whether it is a kernel node (``kernel`` with no ops): eleven rules ask
        # of every node, and the answer stands while the view does (the graph unchanged)
        self._kernel: dict[int, bool] = {}

    def const(self, name: str) -> np.ndarray | None:
        v = self.graph.values.get(name) if name else None
        return None if v is None else v.const

    def static(self, name: str) -> bool:
        v = self.graph.values.get(name)
        return v is not None and v.type.is_static

    def only_user(self, value: str) -> Node | None:
        """The one node that reads ``value``, when nobody else does and it is no graph output."""
        users = self.users.get(value, ())
        return users[0] if len(users) == 1 and value not in self.outputs else None

    def next(self, node: Node) -> Node | None:
        """The one reader of ``node``'s one output (see ``only_user``)."""
        outs = [o for o in node.outputs if o]
        return self.only_user(outs[0]) if len(outs) == 1 and len(node.outputs) == 1 else None

    def kernel(self, node: Node, *ops: str) -> bool:
        """A standard-domain node of one of ``ops`` (any op if none) that an own AI-core
        kernel serves, with one output, static types and no subgraph; a node fused
        before counts by its fused op type."""
        if ops and node.op not in ops:
            return False
        known = self._kernel.get(id(node))
        if known is None:
            known = self._kernel[id(node)] = self._is_kernel(node)
        return known

    def _is_kernel(self, node: Node) -> bool:
        if len(node.outputs) != 1 or not node.outputs[0] or node.implicit_inputs:
            return False
        if not all(self.static(n) for n in node.inputs if n) or not self.static(node.outputs[0]):
            return False
        if is_fused(node):
            return True
        return not node.domain and registry.lookup_def(node.op, "", self.opset) is not None


Matcher = Callable[[View, Node], "Match | None"]


def fused_names(node: Node) -> list[str]:
    return list(node.meta.get("fused", [node.name or node.op]))


def origin_name(node: Node, last: bool = False) -> str:
    """The graph's own node a (possibly fused) node's cost is booked to by a per-node account:
    its head, the Conv or MatMul that does the work (a tensor split), or with ``last`` the
    node whose output leaves the group (a pipeline cut, which then cuts after the group)."""
    names = node.meta.get("fused", [node.name])
    return str(names[-1] if last else names[0])


def fused_ops(node: Node) -> list[str]:
    return list(node.meta.get("fused_ops", [node.op]))


def _members(node: Node) -> list[Node]:
    return list(node.meta["members"]) if is_fused(node) else [node]


def make_fused(match: Match, graph: Graph) -> Node:
    """The one node of a group: its inputs are the members' inputs from outside the group."""
    made = {o for n in match.nodes for o in n.outputs if o}
    inputs: list[str] = []
    for n in match.nodes:
        inputs.extend(i for i in n.inputs if i and i not in made and i not in inputs)
    names = [x for n in match.nodes for x in fused_names(n)]
    ops = [x for n in match.nodes for x in fused_ops(n)]
    rules = [r for n in match.nodes for r in n.meta.get("rules", ())] + [match.rule]
    members = [m for n in match.nodes for m in _members(n)]
    last = match.nodes[-1]
    meta = {"members": members, "fused": names, "fused_ops": ops, "rules": list(dict.fromkeys(rules)), **carried(last)}
    return Node("+".join(names), match.op or "+".join(ops), inputs, list(last.outputs), dict(last.attrs),
                FUSED_DOMAIN, meta=meta)


def apply(graph: Graph, matches: list[Match], build: Callable[[Match, Graph], Node] = make_fused) -> None:
    """Replace each group by its node, at the place of the group's last member."""
    where = {id(m.nodes[-1]): m for m in matches}
    gone = {id(n) for m in matches for n in m.nodes}
    nodes: list[Node] = []
    for n in graph.nodes:
        m = where.get(id(n))
        if m is not None:
            nodes.append(build(m, graph))
        elif id(n) not in gone:
            nodes.append(n)
    graph.nodes = nodes


def run_rule(graph: Graph, matcher: Matcher, build: Callable[[Match, Graph], Node] = make_fused,
             view: View | None = None, heads: frozenset[str] | None = None) -> int:
    """Fuse every group ``matcher`` finds (scanning heads in graph order, groups apart);
    ``view``: the graph's View as it stands, if one was made since its nodes last changed;
    ``heads``: the only ops the matcher can start a group at (None: offer it every node)."""
    view = view or View(graph)
    taken: set[int] = set()
    matches: list[Match] = []
    for node in graph.nodes if heads is None else [n for n in graph.nodes if n.op in heads]:
        if id(node) in taken:
            continue
        m = matcher(view, node)
        if m is None or any(id(n) in taken for n in m.nodes) or not _closed(view, m):
            continue
        taken.update(id(n) for n in m.nodes)
        matches.append(m)
    if matches:
        apply(graph, matches, build)
    return len(matches)


CARRIED = ("stream_label", "schedule_stream")   # what a user said about a node's stream: kept by its group


def carried(node: Node) -> dict[str, object]:
    return {k: node.meta[k] for k in CARRIED if k in node.meta}


def _closed(view: View, m: Match) -> bool:
    """Every value made inside the group but the last node's is read only inside it, and
    no two members were put on different streams by the user."""
    if any(carried(n) != carried(m.nodes[0]) for n in m.nodes[1:]):
        return False
    inside = {id(n) for n in m.nodes}
    for n in m.nodes[:-1]:
        for o in n.outputs:
            if o and (o in view.outputs or any(id(u) not in inside for u in view.users.get(o, ()))):
                return False
    return True
