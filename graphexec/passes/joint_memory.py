"""Joint stream and memory planning (``memory="joint"``): add events to reuse more.

With several streams, tensors of parallel branches are unordered and may not share
bytes. This pass looks at the tensors that set the pool's size (a maximum-weight
clique of the conflict graph), and for pairs that did not overlap in a timing-only run
it orders them with an extra dependency: the later tensor's writers wait for every use
of the earlier one. Events follow from the new dependencies as usual; the pass keeps a
round only if the pool shrinks, and records what it cost in simulated time.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import networkx as nx

from graphexec.passes.event_insertion import insert_events
from graphexec.plan.lifetimes import Lifetime
from graphexec.plan.schedule import Schedule
from graphexec.plan.tasks import TaskGraph

MAX_ROUNDS = 6


def _clique(items: list[Lifetime], clash: list[list[int]]) -> list[int]:
    g = nx.Graph()
    g.add_nodes_from((i, {"weight": it.size}) for i, it in enumerate(items))
    g.add_edges_from((i, j) for i, cl in enumerate(clash) for j in cl if i < j)
    return sorted(nx.max_weight_clique(g)[0], key=lambda i: -items[i].size)


def _span(item: Lifetime, tasks: TaskGraph, times: dict[int, tuple[float, float]]) -> tuple[float, float, list[int]]:
    """Executed interval of a tensor and the ids of the tasks that use it."""
    users = [t.id for t in tasks.tasks if any(tasks.root(n) == item.name for n in (*t.reads, *t.writes))]
    return min(times[w][0] for w in item.writers), max(times[u][1] for u in users), users


def extra_deps(items: list[Lifetime], clash: list[list[int]], tasks: TaskGraph,
               times: dict[int, tuple[float, float]]) -> dict[int, set[int]]:
    """Dependencies that order the largest time-disjoint pair in the clique."""
    clique = _clique(items, clash)
    spans = {i: _span(items[i], tasks, times) for i in clique}
    pairs = []
    for i in clique:
        for j in clique:
            # launch order must already put every use of i before j's writers
            if i != j and spans[i][1] <= spans[j][0] and max(spans[i][2]) < min(items[j].writers):
                pairs.append((min(items[i].size, items[j].size), i, j))
    if not pairs:
        return {}
    _, i, j = max(pairs)
    return {w: set(spans[i][2]) - {w} for w in items[j].writers}


def with_deps(tasks: TaskGraph, extra: dict[int, set[int]]) -> TaskGraph:
    deps = {k: set(v) for k, v in tasks.deps.items()}
    for k, v in extra.items():
        deps.setdefault(k, set()).update(v)
    return replace(tasks, deps=deps)


def joint_plan(tasks: TaskGraph, schedule: Schedule, plan_fn: Any, time_fn: Any) -> tuple[Schedule, Any, dict]:
    """Iterate: plan memory, order one disjoint pair of the peak clique, re-schedule.

    ``plan_fn(schedule) -> MemoryPlan`` and ``time_fn(schedule) -> (makespan,
    {task id: (start, end)})`` are supplied by the memory pass.
    """
    plan = plan_fn(schedule)
    start_time, times = time_fn(schedule)
    stream_of = list(schedule.stream_of[:len(tasks.tasks)])
    report = {"rounds": 0, "added_dependencies": 0, "pool_before": plan.peak_bytes, "time_before_us": start_time}
    best = (plan.peak_bytes, schedule, plan, 0, 0)
    current, added = tasks, 0
    for rounds in range(1, MAX_ROUNDS + 1 if plan.clash else 1):  # no conflict lists in lane mode
        # one ordered pair may only move the peak to another clique of equal weight,
        # so rounds may tie; the best pool seen is kept
        extra = extra_deps(plan.items, plan.clash, current, times)
        if not extra:
            break
        current = with_deps(current, extra)
        added += sum(len(v) for v in extra.values())
        schedule = insert_events(current, stream_of, schedule.policy, schedule.priorities)
        plan = plan_fn(schedule)
        if plan.peak_bytes > best[0]:
            break
        _, times = time_fn(schedule)
        if plan.peak_bytes < best[0]:
            best = (plan.peak_bytes, schedule, plan, rounds, added)
    _, schedule, plan, report["rounds"], report["added_dependencies"] = best
    report.update(pool_after=plan.peak_bytes, time_after_us=time_fn(schedule)[0])
    return schedule, plan, report
