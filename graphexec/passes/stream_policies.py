"""Stream assignment policies: which logical stream runs each kernel task.

Every policy returns a list ``stream_of[task.id]`` with stream numbers in 0..limit-1;
event insertion (passes/events.py) then turns it into a Schedule. The policies:

- ``single``: everything on stream 0.
- ``ge``: GE's AssignByDependencyPass rule: a task continues a predecessor's stream
  unless that predecessor has another successor; new streams cycle under the limit.
- ``chains``: Nimble's minimum chain cover (maximum matching on the transitive
  reduction), chains then packed onto the streams by longest-processing-time first.
- ``list``: a list scheduler (HEFT-like) over the streams with the cost model's times.
"""

from __future__ import annotations

import math
import sys
from collections import deque
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Callable, Iterator

import networkx as nx

from graphexec import _switch
from graphexec.passes.makespan_bounds import fastest_all
from graphexec.plan.tasks import TaskGraph
from graphexec.runtime.profiles import DeviceProfile

Policy = Callable[[TaskGraph, int, DeviceProfile], list[int]]


def task_dag(tasks: TaskGraph) -> nx.DiGraph:
    g = nx.DiGraph()
    g.add_nodes_from(t.id for t in tasks.tasks)
    g.add_edges_from((p, c) for c, ps in tasks.deps.items() for p in ps)
    return g


def single(tasks: TaskGraph, limit: int, profile: DeviceProfile) -> list[int]:
    return [0] * len(tasks.tasks)


def ge(tasks: TaskGraph, limit: int, profile: DeviceProfile) -> list[int]:
    """Continue a predecessor's stream when it has no other successor, else open one."""
    succs: dict[int, list[int]] = {t.id: [] for t in tasks.tasks}
    for c, ps in tasks.deps.items():
        for p in ps:
            succs[p].append(c)
    stream_of: list[int] = [0] * len(tasks.tasks)
    taken: set[int] = set()  # predecessors whose stream was continued already
    opened = 0
    weight = _weights(tasks, profile)
    for t in tasks.tasks:
        preds = sorted(tasks.deps.get(t.id, ()), key=lambda p: (-weight[p], p))
        reusable = [p for p in preds if len(succs[p]) == 1 and p not in taken]
        if reusable:
            taken.add(reusable[0])
            stream_of[t.id] = stream_of[reusable[0]]
        else:
            stream_of[t.id] = opened % limit
            opened += 1
    return stream_of


# inside ``shared_weights``: (tasks, profile, their weights once worked out), for the policies of one search
_SHARED: ContextVar[list | None] = ContextVar("graphexec_stream_weights", default=None)


@contextmanager
def shared_weights(tasks: TaskGraph, profile: DeviceProfile) -> Iterator[None]:
    """Inside the block, the policies run on ``tasks`` and ``profile`` work their task
    weights out once between them (the auto search runs three policies on one task graph);
    the policies only read them."""
    token = _SHARED.set([tasks, profile, None])
    try:
        yield
    finally:
        _SHARED.reset(token)


def _weights(tasks: TaskGraph, profile: DeviceProfile) -> list[float]:
    """Each task's time alone on the device, by task id (ids are the tasks' indices)."""
    held = _SHARED.get()
    if held is None or held[0] is not tasks or held[1] is not profile:
        return fastest_all(tasks.tasks, profile)
    if held[2] is None:
        held[2] = fastest_all(tasks.tasks, profile)
    return held[2]   # type: ignore[no-any-return]


def reduced_edges(tasks: TaskGraph) -> list[tuple[int, int]]:
    """The edges of the task DAG's transitive reduction, sorted.

    An edge p -> c is redundant when c is reachable from another successor of p, so only
    tasks with two or more successors can lose one, and the search for them never passes
    p's last successor in a topological order: a chain costs O(n), a branch the region
    up to where it joins (networkx's reduction walks every descendant of every task,
    quadratic on a long chain).
    """
    succ: dict[int, list[int]] = {t.id: [] for t in tasks.tasks}
    for c, ps in tasks.deps.items():
        for q in ps:
            succ[q].append(c)
    pos = {t: i for i, t in enumerate(_topological(succ))}
    edges: list[tuple[int, int]] = []
    for q, kids in succ.items():
        if len(kids) < 2:
            edges.extend((q, c) for c in kids)
            continue
        limit = max(pos[c] for c in kids)
        seen: set[int] = set()
        stack = [g for c in kids for g in succ[c] if pos[g] <= limit]
        while stack:
            v = stack.pop()
            if v not in seen:
                seen.add(v)
                stack.extend(g for g in succ[v] if pos[g] <= limit and g not in seen)
        edges.extend((q, c) for c in kids if c not in seen)
    return sorted(edges)


def _topological(succ: dict[int, list[int]]) -> list[int]:
    indeg = dict.fromkeys(succ, 0)
    for kids in succ.values():
        for c in kids:
            indeg[c] += 1
    order = [t for t, d in indeg.items() if d == 0]
    for t in order:   # grows as it goes (Kahn)
        for c in succ[t]:
            indeg[c] -= 1
            if indeg[c] == 0:
                order.append(c)
    return order


def chain_cover(tasks: TaskGraph) -> list[list[int]]:
    """A minimum path cover of the transitive reduction (Nimble): matched edges chain tasks."""
    left = sorted(t.id for t in tasks.tasks)
    edges = reduced_edges(tasks)
    with _recursion_for(len(left)):   # the augmenting-path search recurses once per task on a path
        nxt = _matching(left, edges) if _switch.fast() else _nx_matching(left, edges)
    has_prev = set(nxt.values())
    chains = []
    for t in tasks.tasks:
        if t.id in has_prev:
            continue
        chain, cur = [t.id], t.id
        while cur in nxt:
            cur = nxt[cur]
            chain.append(cur)
        chains.append(chain)
    return chains


def _nx_matching(left: list[int], edges: list[tuple[int, int]]) -> dict[int, int]:
    """The matching as networkx finds it (the plain reference of ``_matching``): each
    task matched to the successor that follows it on its chain."""
    # task n's "out" side is n, its "in" side ~n: int nodes hash the same in every process
    # (string tuples do not), so the matching, and the streams, do not depend on the hash seed;
    # the reduction's edges are distinct, so no DiGraph is needed to dedupe them
    bip = nx.Graph()
    bip.add_nodes_from(left, bipartite=0)
    bip.add_nodes_from((~n for n in left), bipartite=1)
    bip.add_edges_from(sorted((u, ~v) for u, v in edges))
    matching = nx.bipartite.hopcroft_karp_matching(bip, top_nodes=left)
    return {u: ~v for u, v in matching.items() if u >= 0}


def _matching(left: list[int], edges: list[tuple[int, int]]) -> dict[int, int]:
    """networkx's Hopcroft-Karp (``_nx_matching``) step for step on plain dicts and lists:
    the same visiting order (its top set's iteration order; each task's successors as its
    sorted edge list gives them, ~v ascending), so the same matching, without building the
    bipartite graph or reading it through networkx's views (half of the chains policy)."""
    inf = math.inf
    adj: dict[int, list[int]] = {u: [] for u in left}
    for u, v in sorted((u, ~v) for u, v in edges):
        adj[u].append(~v)
    order = list(set(left))   # networkx's top set, iterated as it iterates it
    lm: dict[int, int | None] = dict.fromkeys(order)   # task -> the successor matched to it
    rm: dict[int, int | None] = dict.fromkeys(left)    # successor -> the task matched to it
    dist: dict[int | None, float] = {}

    def bfs() -> bool:
        queue: deque[int | None] = deque()
        for v in order:
            if lm[v] is None:
                dist[v] = 0
                queue.append(v)
            else:
                dist[v] = inf
        dist[None] = inf
        while queue:
            w = queue.popleft()
            if dist[w] < dist[None]:
                for c in adj[w]:   # type: ignore[index]   # None never passes the test above
                    r = rm[c]
                    if dist[r] is inf:
                        dist[r] = dist[w] + 1
                        queue.append(r)
        return dist[None] is not inf

    def dfs(v: int | None) -> bool:
        if v is None:
            return True
        for c in adj[v]:
            r = rm[c]
            if dist[r] == dist[v] + 1 and dfs(r):
                rm[c] = v
                lm[v] = c
                return True
        dist[v] = inf
        return False

    while bfs():
        for v in order:
            if lm[v] is None:
                dfs(v)
    return {u: c for u, c in lm.items() if c is not None}


@contextmanager
def _recursion_for(depth: int) -> Iterator[None]:
    """Python's recursion limit raised to ``depth`` frames more than it is, for the block:
    Hopcroft-Karp's search in networkx is recursive, as deep as the longest augmenting path
    (a 12,500-node layered graph on 4 streams hit the default 1,000). Python-to-Python calls
    do not grow the C stack (3.11+), so the deeper limit is safe for it."""
    before = sys.getrecursionlimit()
    sys.setrecursionlimit(max(before, before + depth))
    try:
        yield
    finally:
        sys.setrecursionlimit(before)


def chains(tasks: TaskGraph, limit: int, profile: DeviceProfile) -> list[int]:
    """Chain cover packed onto ``limit`` streams, heaviest chain to the least loaded stream."""
    cover = chain_cover(tasks)
    weight = _weights(tasks, profile)
    cost = [sum(weight[i] for i in c) for c in cover]
    load = [0.0] * limit
    stream_of = [0] * len(tasks.tasks)
    for ci in sorted(range(len(cover)), key=lambda i: (-cost[i], cover[i][0])):
        s = min(range(limit), key=lambda k: (load[k], k))
        load[s] += cost[ci]
        for tid in cover[ci]:
            stream_of[tid] = s
    return stream_of


def list_schedule(tasks: TaskGraph, limit: int, profile: DeviceProfile) -> list[int]:
    """HEFT-like: by upward rank, each task to the stream where it can start earliest."""
    dur = _weights(tasks, profile)
    succs: dict[int, list[int]] = {t.id: [] for t in tasks.tasks}
    for c, ps in tasks.deps.items():
        for p in ps:
            succs[p].append(c)
    rank = [0.0] * len(tasks.tasks)
    for t in reversed(tasks.tasks):
        rank[t.id] = dur[t.id] + max(map(rank.__getitem__, succs[t.id]), default=0.0)
    finish = [0.0] * len(tasks.tasks)
    free = [0.0] * limit
    stream_of = [0] * len(tasks.tasks)
    # tasks are in topological order; rank order within that keeps dependencies first
    for t in sorted(tasks.tasks, key=lambda t: (-rank[t.id], t.id)):
        ready = max(map(finish.__getitem__, tasks.deps.get(t.id, ())), default=0.0)
        s = _earliest(free, ready)
        finish[t.id] = max(free[s], ready) + dur[t.id]
        free[s] = finish[t.id]
        stream_of[t.id] = s
    return stream_of


def _earliest(free: list[float], ready: float) -> int:
    """``min(range(len(free)), key=lambda k: (max(free[k], ready), k))`` without a call per
    stream: the first stream free by ``ready``, else the first of those free soonest."""
    for k, f in enumerate(free):
        if f <= ready:
            return k
    return free.index(min(free))


POLICIES: dict[str, Policy] = {"single": single, "ge": ge, "chains": chains, "list": list_schedule}
