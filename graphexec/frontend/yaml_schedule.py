"""Checking a hand-written schedule: explicit streams and events, as plain data.

The schedule is kept in ``Graph.meta["schedule"]`` in this form::

    {"streams": [{"name": "pre", "priority": 0,
                  "tasks": [{"run": "normalize"}, {"record": "pre_done"}]},
                 {"name": "main", "priority": None,
                  "tasks": [{"run": "matmul"}, {"wait": "pre_done"}, {"run": "post"}]}],
     "synchronize": ["pre", "main"]}

A record happens before every wait for its event, and tasks of one stream run in
order. Every data dependency between nodes on different streams must be covered by a
chain of such edges (through any streams); a missing event is reported, never added,
because a hand-written schedule says what the author means to launch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

import networkx as nx

Path = tuple[str | int, ...]
Item = tuple[int, int]  # (stream index, task index)


@dataclass(frozen=True, slots=True)
class NodeRef:
    """A node as the check sees it: its stream label and where it is defined."""

    name: str
    stream_label: str | None
    path: Path


def check_schedule(schedule: dict[str, Any], nodes: Iterable[NodeRef],
                   deps: Iterable[tuple[str, str, str]]) -> list[tuple[Path, str]]:
    """Every problem of ``schedule`` as (path, message), in a stable order.

    Args:
        schedule: the plain-data schedule described in the module docstring.
        nodes: every node of the graph.
        deps: (producer, consumer, value) for each value passed between two nodes.
    """
    by_name = {n.name: n for n in nodes}
    streams = schedule["streams"]
    problems: list[tuple[Path, str]] = []
    where = _placements(streams, by_name, problems)
    records = _events(streams, problems)
    problems += _labels(streams, by_name, where)
    names = [s["name"] for s in streams]
    for i, s in enumerate(schedule.get("synchronize") or []):
        if s not in names:
            problems.append((("schedule", "synchronize", i), f"synchronize names unknown stream {s!r}"))
    order = _happens_before(streams, records, problems)
    if order is not None:
        problems += _uncovered(streams, where, records, order, deps)
    return problems


def _path(si: int, ti: int) -> Path:
    return ("schedule", "streams", si, "tasks", ti)


def _placements(streams: list[dict], nodes: dict[str, NodeRef], problems: list) -> dict[str, Item]:
    """Where each node runs; unknown, twice-scheduled and unscheduled nodes are problems."""
    where: dict[str, Item] = {}
    seen: dict[str, int] = {}
    for si, s in enumerate(streams):
        if s["name"] in seen:
            problems.append((("schedule", "streams", si, "name"), f"stream {s['name']!r} is defined twice"))
        seen.setdefault(s["name"], si)
        for ti, task in enumerate(s["tasks"]):
            name = task.get("run")
            if name is None:
                continue
            if name not in nodes:
                problems.append((_path(si, ti), f"stream {s['name']!r} runs unknown node {name!r}"))
            elif name in where:
                problems.append((_path(si, ti), f"node {name!r} is scheduled twice "
                                                f"(first on stream {streams[where[name][0]]['name']!r})"))
            else:
                where[name] = (si, ti)
    for name, ref in nodes.items():
        if name not in where:
            problems.append((ref.path, f"node {name!r} is on no stream of the schedule"))
    return where


def _events(streams: list[dict], problems: list) -> dict[str, Item]:
    """Where each event is recorded; a second record or a wait with no record is a problem."""
    records: dict[str, Item] = {}
    for si, s in enumerate(streams):
        for ti, task in enumerate(s["tasks"]):
            ev = task.get("record")
            if ev is not None and ev in records:
                problems.append((_path(si, ti), f"event {ev!r} is recorded twice "
                                                f"(first on stream {streams[records[ev][0]]['name']!r})"))
            elif ev is not None:
                records[ev] = (si, ti)
    for si, s in enumerate(streams):
        for ti, task in enumerate(s["tasks"]):
            ev = task.get("wait")
            if ev is not None and ev not in records:
                problems.append((_path(si, ti), f"stream {s['name']!r} waits for event {ev!r}, "
                                                "which no stream records"))
    return records


def _labels(streams: list[dict], nodes: dict[str, NodeRef], where: dict[str, Item]) -> list[tuple[Path, str]]:
    """Nodes that share a stream_label must share a stream, as GE's AssignByLabelPass makes them."""
    problems: list[tuple[Path, str]] = []
    first: dict[str, str] = {}
    for name, ref in nodes.items():
        if ref.stream_label is None or name not in where:
            continue
        other = first.setdefault(ref.stream_label, name)
        a, b = where[other][0], where[name][0]
        if a != b:
            problems.append((_path(*where[name]), f"nodes {other!r} and {name!r} share stream_label "
                             f"{ref.stream_label!r} but run on streams {streams[a]['name']!r} "
                             f"and {streams[b]['name']!r}"))
    return problems


def _happens_before(streams: list[dict], records: dict[str, Item], problems: list) -> list[Item] | None:
    """Items in an order every stream and event respects, or None (and a problem) on a deadlock."""
    g = nx.DiGraph()
    for si, s in enumerate(streams):
        g.add_nodes_from((si, ti) for ti in range(len(s["tasks"])))
        g.add_edges_from(((si, ti - 1), (si, ti)) for ti in range(1, len(s["tasks"])))
        for ti, task in enumerate(s["tasks"]):
            if task.get("wait") in records:
                g.add_edge(records[task["wait"]], (si, ti))
    try:
        return list(nx.lexicographical_topological_sort(g))
    except nx.NetworkXUnfeasible:
        cycle = nx.find_cycle(g)
        waits = sorted(ev for u, v in cycle if records.get(ev := streams[v[0]]["tasks"][v[1]].get("wait")) == u)
        first = min(item for item, _ in cycle)
        problems.append((_path(*first), f"the schedule deadlocks: the waits for events {', '.join(map(repr, waits))} "
                                        "form a cycle (each event is recorded after a wait for another)"))
        return None


def _uncovered(streams: list[dict], where: dict[str, Item], records: dict[str, Item], order: list[Item],
               deps: Iterable[tuple[str, str, str]]) -> list[tuple[Path, str]]:
    """Data dependencies that no stream order or record/wait chain covers (vector clocks)."""
    clock: dict[Item, list[int]] = {}
    for si, ti in order:
        vc = list(clock[(si, ti - 1)]) if ti else [-1] * len(streams)
        ev = streams[si]["tasks"][ti].get("wait")
        if ev in records:
            vc = [max(a, b) for a, b in zip(vc, clock[records[ev]])]
        vc[si] = ti
        clock[(si, ti)] = vc
    problems, seen = [], set()
    for producer, consumer, value in deps:
        if producer not in where or consumer not in where or (producer, consumer) in seen:
            continue
        seen.add((producer, consumer))
        (ps, pt), (cs, ct) = where[producer], where[consumer]
        if ps == cs and ct < pt:
            problems.append((_path(cs, ct), f"node {consumer!r} runs before node {producer!r}, which makes its "
                                            f"input {value!r}, on stream {streams[cs]['name']!r}"))
        elif ps != cs and clock[(cs, ct)][ps] < pt:
            a, b = streams[ps]["name"], streams[cs]["name"]
            problems.append((_path(cs, ct), f"node {consumer!r} on stream {b!r} reads {value!r} from node "
                             f"{producer!r} on stream {a!r} with no event between them: record an event on "
                             f"{a!r} after {producer!r} and wait for it on {b!r} before {consumer!r}"))
    return problems
