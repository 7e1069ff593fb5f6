"""Independent checks of an executed multi-stream run, from the trace and the schedule."""

from __future__ import annotations

import networkx as nx

from graphexec.plan.tasks import TaskKind


def check_trace_order(trace: dict) -> None:
    """No kernel starts before every writer of its inputs has ended; streams never overlap."""
    kernels = [e for e in trace["traceEvents"] if e.get("cat") == "kernel"]
    end_of = {}
    for e in kernels:
        for o in e["args"]["outputs"]:
            end_of[o] = e["ts"] + e["dur"]
    for e in kernels:
        for i in e["args"]["inputs"]:
            if i in end_of:
                assert end_of[i] <= e["ts"] + 1e-9, f"{e['name']} starts before {i} is written"
    by_stream: dict[int, list] = {}
    for e in (e for e in trace["traceEvents"] if e.get("ph") == "X" and e.get("pid") == 1):
        by_stream.setdefault(e["tid"], []).append((e["ts"], e["ts"] + e["dur"], e["name"]))
    for spans in by_stream.values():
        spans.sort()
        for (s0, e0, n0), (s1, _, n1) in zip(spans, spans[1:]):
            assert e0 <= s1 + 1e-9, f"{n0} and {n1} overlap on one stream"


def sync_graph(schedule) -> tuple[nx.DiGraph, dict[int, int]]:
    """Tasks as nodes; stream order and record->wait edges (a wait pairs with the newest
    record of its event id launched before it). Returns the graph and wait -> record."""
    g = nx.DiGraph()
    for tasks in schedule.streams:
        g.add_nodes_from(t.id for t in tasks)
        g.add_edges_from((a.id, b.id) for a, b in zip(tasks, tasks[1:]))
    newest: dict[int, int] = {}
    pair: dict[int, int] = {}
    for t in schedule.order:
        if t.kind is TaskKind.EVENT_RECORD:
            newest[t.event] = t.id
        elif t.kind is TaskKind.EVENT_WAIT:
            assert t.record == newest[t.event], f"wait {t.id} names record {t.record}, binds to {newest[t.event]}"
            pair[t.id] = newest[t.event]
            g.add_edge(newest[t.event], t.id)
    return g, pair


def check_events_minimal_and_sufficient(tasks, schedule) -> None:
    """Every dependency is ordered by the sync graph, and no wait is implied by the rest."""
    g, pair = sync_graph(schedule)
    reach = {n: nx.descendants(g, n) for n in g.nodes}
    for c, ps in tasks.deps.items():
        for p in ps:
            assert c in reach[p] or p == c, f"dependency {p}->{c} is not ordered"
    for w, r in pair.items():
        g.remove_edge(r, w)
        implied = nx.has_path(g, r, w)
        g.add_edge(r, w)
        assert not implied, f"wait {w} on record {r} is implied by the other waits"
