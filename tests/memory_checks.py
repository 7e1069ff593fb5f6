"""Independent check of a memory plan against an executed trace."""

from __future__ import annotations


def check_no_live_overlap(session, result) -> int:
    """No two activations whose executed lifetimes overlap share bytes; returns pairs checked.

    A tensor lives from the start of its first writer to the end of its last reader,
    read off the trace (its kernel events name their inputs and outputs).
    """
    check_every_tensor_placed(session)
    tasks = session.compiled.tasks
    entries = [e for e in session.memory_plan.buffers if e.region == "activation"]
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


def check_every_tensor_placed(session) -> None:
    """Every tensor a task touches whose buffer is planned is listed, and one that shares
    another's bytes lies inside them, in the same region."""
    plan, tasks, graph = session.memory_plan, session.compiled.tasks, session.compiled.graph
    by_name = plan.by_name
    for t in tasks.tasks:
        for name in (*t.reads, *t.writes):
            root, off = tasks.locate(name) if name else (None, 0)
            if root not in by_name or not graph.values[name].type.is_static:
                continue
            e, r = by_name[name], by_name[root]
            assert (e.alias_of or e.tensor) == root, f"{name}: alias_of {e.alias_of!r}, bytes live in {root!r}"
            assert e.region == r.region and e.offset == r.offset + off, f"{name} is not at its place in {root}"
            assert r.offset <= e.offset and e.offset + e.size <= r.offset + max(r.size, graph.values[root].type.nbytes)
