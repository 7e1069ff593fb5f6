"""Independent check of a memory plan against an executed trace."""

from __future__ import annotations


def check_no_live_overlap(session, result) -> int:
    """No two activations whose executed lifetimes overlap share bytes; returns pairs checked.

    A tensor lives from the start of its first writer to the end of its last reader,
    read off the trace (its kernel events name their inputs and outputs).
    """
    tasks = session.compiled.tasks
    entries = [e for e in session.memory_plan if e.region == "activation"]
    span: dict[str, list[float]] = {}
    for ev in result.trace["traceEvents"]:
        if ev.get("cat") != "kernel":
            continue
        start, end = ev["ts"], ev["ts"] + ev["dur"]
        for name in ev["args"]["outputs"]:
            s = span.setdefault(tasks.root(name), [start, end])
            s[0], s[1] = min(s[0], start), max(s[1], end)
        for name in ev["args"]["inputs"]:
            if tasks.root(name) in span:
                span[tasks.root(name)][1] = max(span[tasks.root(name)][1], end)
    checked = 0
    for i, a in enumerate(entries):
        for b in entries[i + 1:]:
            if a.offset < b.offset + b.size and b.offset < a.offset + a.size and a.size and b.size:
                sa, sb = span[a.tensor], span[b.tensor]
                assert sa[1] <= sb[0] or sb[1] <= sa[0], f"{a.tensor} and {b.tensor} share bytes while both live"
                checked += 1
    return checked
