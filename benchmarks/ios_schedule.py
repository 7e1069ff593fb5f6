"""IOS's schedules of a CNN, run as IOS's runtime runs them, for ``benchmarks/fidelity.py``.

IOS (Ding et al., MLSys'21; mit-han-lab/inter-operator-scheduler) executes a network as a
list of *stages*; a stage is a few *groups* (chains of operators), each group launched on
its own CUDA stream. Its runtime (``src/ios/ios_runtime.cu``, ``Graph::forward``) calls
``cudaDeviceSynchronize()`` after every stage, except between two stages of one group each:
the host waits for the device to drain, then issues the next stage's cuDNN calls. So a
parallel stage costs the slowest group plus a host round trip (the synchronize returning,
the next launch reaching the device), and a sequential schedule (one group per stage) runs
back to back with no synchronize at all.

- ``greedy``: IOS's "greedy" baseline, the wavefront schedule: each stage is every operator
  whose inputs are ready, one operator per group.
- ``ios_parallel``: IOS's dynamic program (``python/ios/optimizer.py``, ``dop`` with
  ``opt_type='dp_parallel'``): per block (the operators between two points every path
  crosses), the cheapest split into stages whose last stage is an *ending* (chain tails
  whose descendants are disjoint, at most 8 groups of at most 3 operators). Its stage
  latencies are estimated from each operator's simulated time alone (IOS measures them
  on the GPU): the slowest group, or the stage's core-time over all cores if larger,
  plus a synchronize when the stage has more than one group.
- ``ios_both``: the same dynamic program with IOS's other strategy too (``dp_parallel_merge``):
  a stage may instead be convolutions of one input merged into one convolution of all their
  output channels (``merged_conv_us``, simulated), whose consumers read their channels in place.

``run_schedule`` then simulates the schedule as IOS runs it: every stretch of work between
two synchronizes is a graph of its own (``passes/pipeline_cut.stage_graph``), its groups on
streams of their own (stream labels); the stretches' times add, and each synchronize costs
``round_trip_us``: the profile's ``sync_return_us`` (the host waking) and ``launch_cost_us``
(its next launch). A stretch is timed in graph mode, which fuses each Conv with its Relu as
IOS's cuDNN call does; inside a stretch the host issues ahead of the device, so its other
launches do not show. Operators: a Conv with its Relu (IOS's conv block), a pool, a Concat
(IOS's identity exit node: no kernel), the final pool.
"""

from __future__ import annotations

import copy
import itertools
from dataclasses import dataclass
from functools import cache
from typing import Any, Callable

import numpy as np

import graphexec as gx
from graphexec.ir import Graph, TensorType
from graphexec.passes.pipeline_cut import Stage, stage_graph
from graphexec.passes.shape_inference import infer_types
from graphexec.runtime.profiles import load_profile

MAX_GROUPS, MAX_GROUP_SIZE = 8, 3   # IOS's optimize() defaults: max_num_groups, max_group_size
Schedule = list[list[list[int]]]    # stages -> groups -> operator ids in order


@dataclass
class Ops:
    """The network as IOS's operators: each one's graph nodes, its predecessors, its
    simulated time alone and its core-time (time x cores it held / all cores)."""

    nodes: list[list[int]]
    preds: list[set[int]]
    time: list[float]
    work: list[float]
    merged_us: Callable[[tuple[int, ...]], float | None] | None = None   # IOS's operator merge, if allowed


def operators(graph: Graph) -> tuple[list[list[int]], list[set[int]]]:
    """Graph nodes grouped into IOS operators (a Relu joins the Conv it follows), in order,
    and each operator's predecessors."""
    producer = {o: i for i, n in enumerate(graph.nodes) for o in n.outputs}
    op_of: dict[int, int] = {}
    nodes: list[list[int]] = []
    for i, n in enumerate(graph.nodes):
        src = producer.get(n.inputs[0], -1) if n.inputs else -1
        if n.op == "Relu" and src >= 0 and graph.nodes[src].op == "Conv":
            op_of[i] = op_of[src]
            nodes[op_of[i]].append(i)
        else:
            op_of[i] = len(nodes)
            nodes.append([i])
    preds = [{op_of[producer[x]] for i in ns for x in graph.nodes[i].inputs if x in producer} - {k}
             for k, ns in enumerate(nodes)]
    return nodes, preds


def typed(graph: Graph, batch: int) -> Graph:
    """A copy of ``graph`` whose every value has its shape at ``batch``."""
    g = copy.deepcopy(graph)
    x = g.inputs[0]
    t = g.values[x].type
    assert t.shape is not None, "the network's input has a declared shape"
    g.values[x].type = TensorType(t.dtype, (batch, *t.shape[1:]))
    infer_types(g)
    return g


def solo_times(graph: Graph, ops: list[list[int]], device: str) -> tuple[list[float], list[float]]:
    """Each operator's simulated time on one stream and its core-time, from one sequential
    simulation's trace (an operator with no kernel: 0)."""
    result = gx.Session(graph, streams=1, device=device).simulate(shapes=_shapes(graph))
    cores = load_profile(device).ai_cores
    by_node = {graph.nodes[i].name: k for k, ns in enumerate(ops) for i in ns}
    time, work = [0.0] * len(ops), [0.0] * len(ops)
    for e in result.trace["traceEvents"]:
        if e.get("ph") != "X" or e.get("cat") != "kernel":
            continue
        k = by_node.get(e["args"].get("fused", [e["args"]["node"]])[0])
        if k is not None:
            time[k] += e["dur"]
            work[k] += e["dur"] * min(e["args"].get("cores", cores), cores) / cores
    return time, work


def _closure(preds: list[set[int]]) -> list[set[int]]:
    """Each operator's ancestors."""
    anc: list[set[int]] = []
    for p in preds:
        a: set[int] = set()
        for q in p:
            a |= anc[q] | {q}
        anc.append(a)
    return anc


def blocks(preds: list[set[int]]) -> list[list[int]]:
    """Operators cut into blocks at the operators every path crosses (every earlier one is
    an ancestor, every later one a descendant): each block ends with such an operator, its
    exit, as IOS's blocks (an inception module and its concatenation) do."""
    anc = _closure(preds)
    n = len(preds)
    below = [0] * n   # how many later operators descend from each
    for j in range(n):
        for a in anc[j]:
            below[a] += 1
    out, cur = [], []
    for k in range(n):
        cur.append(k)
        if len(anc[k]) == k and below[k] == n - 1 - k:
            out.append(cur)
            cur = []
    return out + ([cur] if cur else [])


def greedy(preds: list[set[int]]) -> Schedule:
    """The wavefront schedule: stage n holds every operator whose longest path from the
    input has n operators, one operator per group."""
    level: list[int] = []
    for p in preds:
        level.append(1 + max((level[q] for q in p), default=-1))
    return [[[k] for k in range(len(preds)) if level[k] == n] for n in range(max(level) + 1)]


def _chains(block: list[int], succ: dict[int, set[int]]) -> list[list[int]]:
    """IOS's chain decomposition: split out a longest chain until nothing is left."""
    left, chains = set(block), []
    while left:
        depth: dict[int, tuple[int, int]] = {}
        for u in sorted(left, reverse=True):
            nxt = [(depth[v][0], v) for v in succ[u] if v in left]
            best = max(nxt, default=(0, -1))
            depth[u] = (best[0] + 1, best[1])
        u = max(sorted(left), key=lambda k: depth[k][0])
        chain = []
        while u != -1:
            chain.append(u)
            u = depth[u][1]
        chains.append(chain)
        left -= set(chain)
    return chains


def ios_parallel(ops: Ops, sync_us: float) -> Schedule:
    """IOS's dynamic program per block (``dp_parallel``) on the estimated stage latencies,
    ``sync_us`` the cost of a stage of several groups' synchronize (``round_trip_us``)."""
    succ: dict[int, set[int]] = {k: set() for k in range(len(ops.preds))}
    for k, p in enumerate(ops.preds):
        for q in p:
            succ[q].add(k)
    out: Schedule = []
    for block in blocks(ops.preds):
        out += [groups for groups, _ in _dp(block, succ, ops, sync_us)]
    return out


def _stage_us(groups: list[list[int]], ops: Ops, sync_us: float) -> float:
    slowest = max(sum(ops.time[k] for k in g) for g in groups)
    work = sum(ops.work[k] for g in groups for k in g)
    return max(slowest, work) + (sync_us if len(groups) > 1 else 0.0)


def _endings(s: frozenset[int], chains: list[list[int]], succ: dict[int, set[int]]) -> list[list[list[int]]]:
    """IOS's ``ending_iterator``: one tail (possibly empty) per chain within ``s``, whose
    descendants in ``s`` are disjoint and at most MAX_GROUP_SIZE each; a group is a tail
    with its descendants."""
    desc: dict[int, set[int]] = {}
    for u in sorted(s, reverse=True):
        d = {u}
        for v in succ[u]:
            if v in s:
                d |= desc[v]
        desc[u] = d
    options = []
    for chain in chains:
        inside = list(itertools.takewhile(lambda u: u in s, chain))
        options.append([None, *inside[max(0, len(inside) - MAX_GROUP_SIZE):]])
    found = []
    for pick in itertools.product(*options):
        tails = [u for u in pick if u is not None]
        if not tails or len(tails) > MAX_GROUPS:
            continue
        groups = [desc[u] for u in tails]
        if any(len(g) > MAX_GROUP_SIZE for g in groups):
            continue
        if any(not a.isdisjoint(b) for a, b in itertools.combinations(groups, 2)):
            continue
        found.append([sorted(g) for g in groups])
    return found


def _dp(block: list[int], succ: dict[int, set[int]], ops: Ops, sync_us: float) -> list[tuple[list[list[int]], bool]]:
    """The cheapest stages of one block, each (groups, merged): IOS's ``dop``."""
    chains = _chains(block, succ)

    @cache
    def best(s: frozenset[int]) -> tuple[float, tuple[Any, ...]]:
        if not s:
            return 0.0, ()
        choice: tuple[float, tuple[Any, ...]] = (np.inf, ())
        for groups in _endings(s, chains, succ):
            rest = best(s - {k for g in groups for k in g})
            cost = rest[0] + _stage_us(groups, ops, sync_us)
            if cost < choice[0]:
                choice = (cost, (*rest[1], (tuple(tuple(g) for g in groups), False)))
        for combo in _merges(s, succ, ops):
            us = ops.merged_us(combo) if ops.merged_us is not None else None
            if us is None:
                continue
            rest = best(s - set(combo))
            if rest[0] + us < choice[0]:
                choice = (rest[0] + us, (*rest[1], (((*combo,),), True)))
        return choice

    return [([list(g) for g in groups], merged) for groups, merged in best(frozenset(block))[1]]


def _merges(s: frozenset[int], succ: dict[int, set[int]], ops: Ops) -> list[tuple[int, ...]]:
    """Sets of two or more operators of ``s`` with no successor in ``s`` (IOS's ``s1``), the
    candidates for one merged stage; ``ops.merged_us`` says which merge."""
    if ops.merged_us is None:
        return []
    last = sorted(u for u in s if not (succ[u] & s))
    return [c for r in range(2, len(last) + 1) for c in itertools.combinations(last, r)]


def ios_both(ops: Ops, sync_us: float) -> tuple[Schedule, list[tuple[int, ...]]]:
    """IOS's ``dp_parallel_merge``: stages of concurrent groups or of convolutions merged into
    one (``ops.merged_us``); the schedule and the operator sets merged."""
    succ: dict[int, set[int]] = {k: set() for k in range(len(ops.preds))}
    for k, p in enumerate(ops.preds):
        for q in p:
            succ[q].add(k)
    out: Schedule = []
    merged: list[tuple[int, ...]] = []
    for block in blocks(ops.preds):
        for groups, was_merged in _dp(block, succ, ops, sync_us):
            out.append(groups)
            if was_merged:
                merged.append(tuple(groups[0]))
    return out, merged


def merged_conv_us(graph: Graph, nodes: list[list[int]], combo: tuple[int, ...], device: str) -> float | None:
    """The simulated time of IOS's merge of the convolutions ``combo`` (``check_merge``: one
    input, the same stride, output size and activation, no groups) into one convolution of
    all their output channels, the largest kernel and padding; None where IOS would not."""
    convs = [graph.nodes[nodes[k][0]] for k in combo]
    if any(c.op != "Conv" or c.attrs.get("group", 1) != 1 for c in convs):
        return None
    first = convs[0]
    relu = {len(nodes[k]) == 2 for k in combo}
    strides = {tuple(c.attrs.get("strides", (1, 1))) for c in convs}
    out_hw = {_dims(graph, c.outputs[0])[2:] for c in convs}
    if any(c.inputs[0] != first.inputs[0] for c in convs) or len(strides) > 1 or len(out_hw) > 1 or len(relu) > 1:
        return None
    weights = [_dims(graph, c.inputs[1]) for c in convs]
    pads = tuple(max(int(c.attrs.get("pads", (0, 0, 0, 0))[i]) for c in convs) for i in range(4))
    return _merged_us(_dims(graph, first.inputs[0]), sum(w[0] for w in weights), max(w[2] for w in weights),
                      max(w[3] for w in weights), strides.pop(), pads, relu.pop(), device)


def _dims(graph: Graph, name: str) -> tuple[int, ...]:
    """``name``'s static shape (``typed`` made every value's static)."""
    shape = graph.values[name].type.shape
    if shape is None or not all(isinstance(d, int) for d in shape):
        raise ValueError(f"{name!r} has no static shape: {shape}")
    return tuple(int(d) for d in shape)   # type: ignore[arg-type]


@cache
def _merged_us(shape: tuple[int, ...], cout: int, kh: int, kw: int, strides: tuple[int, ...],
               pads: tuple[int, ...], relu: bool, device: str) -> float:
    """One convolution (and its Relu) of those sizes alone, simulated."""
    b = gx.GraphBuilder("merged", opset=17)
    x = b.input("x", "float32", list(shape))
    w = np.zeros((cout, shape[1], kh, kw), np.float32)
    y = b.Conv(x, w, np.zeros(cout, np.float32), kernel_shape=[kh, kw], strides=list(strides), pads=list(pads))
    b.output(b.Relu(y) if relu else y)
    return float(gx.Session(b.build(), streams=1, device=device).simulate(shapes={"x": shape}).stats.makespan_us)


def round_trip_us(device: str) -> float:
    """What a synchronize between two stages costs the device: the host's wake-up
    (``sync_return_us``) and its next launch (``launch_cost_us``)."""
    profile = load_profile(device)
    return (profile.sync_return_us or 0.0) + profile.launch_cost_us


def syncs(schedule: Schedule) -> list[bool]:
    """After which stages IOS's runtime synchronizes the device (``Graph::forward``): all
    but the last, except between two stages of one group each."""
    n = len(schedule)
    return [i + 1 < n and not (len(schedule[i]) == 1 and len(schedule[i + 1]) == 1) for i in range(n)]


def stretches(schedule: Schedule) -> list[list[list[int]]]:
    """The stages between synchronizes, as one list of groups each: the device runs a
    stretch from one synchronize to the next (consecutive one-group stages form one group;
    a stage of several groups is always followed, and preceded, by a synchronize)."""
    out: list[list[list[int]]] = []
    cur: list[list[int]] = []
    for stage, sync in zip(schedule, syncs(schedule)):
        cur = [(cur[0] if cur else []) + stage[0]] if len(stage) == 1 and len(cur) <= 1 else stage
        if sync:
            out.append(cur)
            cur = []
    return out + ([cur] if cur else [])


def run_schedule(graph: Graph, ops: list[list[int]], schedule: Schedule, device: str,
                 merged: list[tuple[int, ...]] | None = None) -> float:
    """Simulated time (us) of ``schedule`` run as IOS runs it on ``device``: the stretches'
    times plus ``round_trip_us`` per synchronize; ``graph`` typed (``typed``). A set of
    ``merged`` operators runs as its merged convolution (``merged_conv_us``), inside its
    stretch (a merged stage is one group): its consumers read its channels in place."""
    total = 0.0
    apart = {k for combo in merged or [] for k in combo}
    for combo in merged or []:
        us = merged_conv_us(graph, ops, combo, device)
        assert us is not None, f"operators {combo} cannot merge"
        total += us
    for groups in stretches(schedule):
        nodes = [[i for k in g if k not in apart for i in ops[k] if graph.nodes[i].op != "Concat"] for g in groups]
        nodes = [g for g in nodes if g]
        if nodes:   # a Concat alone is IOS's identity exit: no kernel
            total += _stretch_us(graph, nodes, device)
    return total + sum(syncs(schedule)) * round_trip_us(device)


def _stretch_us(graph: Graph, groups: list[list[int]], device: str) -> float:
    """One stretch as a graph of its own, each group on a stream of its own. It is timed in
    graph mode, which fuses each Conv with its Relu as cuDNN's ConvolutionBiasActivation
    does (host launch runs every op alone) and, as the host runs ahead of the device
    inside a stretch, leaves out the launches but the first (``round_trip_us``)."""
    flat = sorted(i for g in groups for i in g)
    inside = {o for i in flat for o in graph.nodes[i].outputs}
    stage = Stage(0, flat)
    for i in flat:
        for x in graph.nodes[i].inputs:
            if x and x not in inside and graph.values[x].const is None:
                stage.receives.setdefault(x, 0)
    rest = {x for j, n in enumerate(graph.nodes) if j not in set(flat) for x in n.inputs}
    stage.outputs = [o for o in inside if o in rest or o in graph.outputs]
    sub = stage_graph(graph, stage, {})
    label = {graph.nodes[i].name: f"group{j}" for j, g in enumerate(groups) for i in g}
    for node in sub.nodes:
        if node.name in label:
            node.meta["stream_label"] = label[node.name]
    session = gx.Session(sub, streams=len(groups), device=device)
    return float(session.simulate(shapes=_shapes(sub)).stats.makespan_us)


def _shapes(graph: Graph) -> dict[str, tuple[int, ...]]:
    """Each input's static shape."""
    return {x: _dims(graph, x) for x in graph.inputs}
