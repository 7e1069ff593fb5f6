"""Independent checks of an executed multi-stream run, from the trace and the schedule."""

from __future__ import annotations

from graphexec.passes.contracts import check_events, sync_graph

__all__ = ["check_events_minimal_and_sufficient", "check_trace_order", "sync_graph"]


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


def check_events_minimal_and_sufficient(tasks, schedule) -> None:
    """Every dependency is ordered by the sync graph, and no wait is implied by the rest:
    the stream-assignment pass's own ensures, asked for outright (they are also on in
    every test's compiles)."""
    check_events(tasks, schedule)
