"""Cutting a graph into contiguous pipeline stages balanced on the cost model.

The nodes that compute (every node but those whose inputs are all constants: a
``ConstantOfShape`` that makes a weight, and what follows from such nodes alone) are
taken in topological order and cut into ``n`` contiguous stages. A stage's time is the
longer of the sum of its nodes' times (each node's tasks at their fastest,
``makespan_bounds.fastest_us``, in a one-device plan compiled for one micro-batch) and the
transfers of the values it reads from earlier stages (one peer copy each: latency +
bytes / bandwidth of the link from the previous card), which the double-buffered run
overlaps with the compute. A dynamic program over the cut points minimizes the slowest
stage. Constant nodes are no stage's: every stage that reads one of their values gets
its own copy of them (they fold away when the stage compiles).

Each stage is then a :class:`Graph` of its own whose inputs are the graph inputs and
the crossing values it reads and whose outputs are the graph outputs it computes and
the values later stages read.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from graphexec.errors import GraphExecError
from graphexec.ir import Graph, TensorType
from graphexec.passes.fusion_groups import origin_name
from graphexec.passes.makespan_bounds import fastest_us
from graphexec.plan import Plan
from graphexec.plan.tasks import TaskKind
from graphexec.runtime.systems import LinkSpec


@dataclass
class Stage:
    """One stage: its nodes (indices into the graph's nodes), what it reads from the host
    (graph inputs), what it reads from earlier stages (value -> producing stage), and
    its outputs (graph outputs and values later stages read)."""

    index: int
    nodes: list[int]
    feeds: list[str] = field(default_factory=list)
    receives: dict[str, int] = field(default_factory=dict)
    outputs: list[str] = field(default_factory=list)
    cost_us: float = 0.0


def constant_nodes(graph: Graph) -> set[int]:
    """Indices of the nodes whose every input is a constant or a constant node's output."""
    known = {n for n, v in graph.values.items() if v.const is not None}
    out: set[int] = set()
    for i, node in enumerate(graph.nodes):
        if node.outputs and all(x in known for x in node.all_inputs) and not node.attrs.get("seed") \
                and not node.op.startswith("Random"):
            out.add(i)
            known.update(o for o in node.outputs if o)
    return out


def node_costs(plan: Plan) -> dict[str, float]:
    """Each node's time (us): its kernel tasks at their fastest, in a compiled plan."""
    costs: dict[str, float] = {}
    for t in plan.tasks.tasks:
        if t.node is not None and t.kind in (TaskKind.KERNEL, TaskKind.AICPU, TaskKind.CONTROL):
            name = origin_name(t.node, last=True)   # a fused task's time: its group's last node's
            costs[name] = costs.get(name, 0.0) + fastest_us(t, plan.profile)
    return costs


def value_bytes(plan: Plan) -> dict[str, int]:
    """The bytes of every statically sized value of the compiled plan's graph."""
    return {n: v.type.nbytes for n, v in plan.graph.values.items() if v.type.is_static}


def cut(graph: Graph, n: int, costs: dict[str, float], nbytes: dict[str, int],
        links: Sequence[LinkSpec]) -> list[Stage]:
    """``n`` contiguous stages of ``graph`` minimizing the slowest stage's time;
    ``links[s]`` is the path into stage ``s`` (from card ``s - 1``; ``links[0]`` unused)."""
    const = constant_nodes(graph)
    order = [i for i in range(len(graph.nodes)) if i not in const]
    k = len(order)
    if n > k:
        nodes = "1 node" if k == 1 else f"{k} nodes"
        raise GraphExecError(f"pipeline: {n} stages but the graph has only {nodes} to cut into stages")
    pos = {o: p for p, node in enumerate(order) for o in graph.nodes[node].outputs if o}
    uses: dict[str, list[int]] = {}
    for p, node in enumerate(order):
        for x in dict.fromkeys(graph.nodes[node].all_inputs):
            if x in pos:
                uses.setdefault(x, []).append(p)
    # crossing[i, j]: bytes / copies a stage of nodes [i, j) receives from before i
    crossing_bytes = np.zeros((k + 1, k + 2))
    crossing_count = np.zeros((k + 1, k + 2))
    for name, ps in uses.items():
        p, size, c = pos[name], float(nbytes.get(name, 0)), 0
        for i in range(p + 1, ps[-1] + 1):
            while ps[c] < i:
                c += 1
            crossing_bytes[i, ps[c] + 1] += size
            crossing_count[i, ps[c] + 1] += 1
    crossing_bytes = np.cumsum(crossing_bytes, axis=1)[:, :k + 1]
    crossing_count = np.cumsum(crossing_count, axis=1)[:, :k + 1]
    work = np.concatenate([[0.0], np.cumsum([costs.get(graph.nodes[i].name, 0.0) for i in order])])
    inf = float("inf")
    best = np.full((n + 1, k + 1), inf)
    arg = np.zeros((n + 1, k + 1), dtype=np.int64)
    best[0, 0] = 0.0
    for s in range(1, n + 1):
        link = links[s - 1]
        per_byte, per_copy = 1.0 / (link.bandwidth_gbps * 1e3), link.latency_us
        for j in range(s, k - (n - s) + 1):
            starts = np.arange(s - 1, j)
            stage = work[j] - work[starts]
            if s > 1:
                # double-buffered (cluster/pipeline.py): the copies into a stage overlap its
                # compute of the micro-batch before, so a stage lasts the longer of the two
                stage = np.maximum(stage, crossing_bytes[starts, j] * per_byte + crossing_count[starts, j] * per_copy)
            total = np.maximum(best[s - 1, starts], stage)
            a = int(np.argmin(total))
            best[s, j], arg[s, j] = total[a], starts[a]
    bounds, j = [k], k
    for s in range(n, 0, -1):
        j = int(arg[s, j])
        bounds.append(j)
    bounds.reverse()
    stages = [Stage(s, [order[p] for p in range(bounds[s], bounds[s + 1])]) for s in range(n)]
    for s, st in enumerate(stages):
        a, b = bounds[s], bounds[s + 1]
        st.cost_us = float(work[b] - work[a])
    _wire(graph, stages, bounds, pos, uses)
    return stages


def _wire(graph: Graph, stages: list[Stage], bounds: list[int], pos: dict[str, int],
          uses: dict[str, list[int]]) -> None:
    """Each stage's feeds, received values and outputs."""
    stage_of = [s for s in range(len(stages)) for _ in range(bounds[s], bounds[s + 1])]
    inputs = set(graph.inputs)
    for st in stages:
        for node in st.nodes:
            for x in graph.nodes[node].all_inputs:
                if x in inputs and x not in st.feeds:
                    st.feeds.append(x)
                elif x in pos and stage_of[pos[x]] != st.index and x not in st.receives:
                    st.receives[x] = stage_of[pos[x]]
    for name in graph.outputs:
        if name in pos and name not in stages[stage_of[pos[name]]].outputs:
            stages[stage_of[pos[name]]].outputs.append(name)
    for name, ps in uses.items():
        src = stage_of[pos[name]]
        if any(stage_of[p] != src for p in ps) and name not in stages[src].outputs:
            stages[src].outputs.append(name)


def stage_graph(graph: Graph, stage: Stage, types: dict[str, TensorType]) -> Graph:
    """The stage as a graph of its own: its nodes (and the constant nodes they read),
    inputs its feeds and received values (typed by ``types``), outputs its outputs."""
    const = constant_nodes(graph)
    producers = {o: i for i, node in enumerate(graph.nodes) for o in node.outputs if o}
    need = set(stage.nodes)
    todo = [x for i in stage.nodes for x in graph.nodes[i].all_inputs]
    while todo:   # the constant nodes the stage reads, and theirs
        i = producers.get(todo.pop(), -1)
        if i in const and i not in need:
            need.add(i)
            todo.extend(graph.nodes[i].all_inputs)
    g = copy.copy(graph)
    g.nodes = []
    for i in sorted(need):
        node = copy.copy(graph.nodes[i])
        node.inputs, node.outputs, node.meta = list(node.inputs), list(node.outputs), dict(node.meta)
        g.nodes.append(node)
    names = {x for node in g.nodes for x in [*node.all_inputs, *node.outputs] if x}
    g.values = {x: copy.copy(graph.values[x]) for x in names if x in graph.values}
    g.inputs = stage.feeds + list(stage.receives)
    for x in g.inputs:
        if x in types:
            g.values[x].type = types[x]
    g.outputs = list(stage.outputs)
    g.meta = dict(graph.meta)
    g.name = f"{graph.name}.stage{stage.index}"
    return g
