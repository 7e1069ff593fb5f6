"""A multi-card run's summary that adds up: the makespan split into what filled each instant
(host copies in, compute on some card, communication no compute hid, host copies out, no
card busy: each instant counted once, in that order of precedence, so the parts sum to the
makespan), each card's idle time (a pipeline's bubble), and why a tensor-parallel run split
nothing (``stats.extra["tensor_splits"]``)."""

from __future__ import annotations

from typing import Any

from graphexec._render import term

ORDER = ("host copies in", "compute", "communication not hidden", "host copies out", "no card busy")


def _what(e: dict[str, Any]) -> str | None:
    cat, args = e.get("cat"), e.get("args", {})
    if cat == "kernel" or (cat == "memcpy" and args.get("kind") == "d2d"):
        return "compute"
    if cat == "hccl" or (cat == "memcpy" and args.get("kind", "").startswith("p2p")):
        return "communication not hidden"
    if cat == "memcpy" and args.get("kind") == "h2d":
        return "host copies in"
    if cat == "memcpy" and args.get("kind") == "d2h":
        return "host copies out"
    return None


def makespan_parts(trace: dict[str, Any]) -> tuple[float, dict[str, float], dict[int, float]]:
    """(window, part -> us, card -> busy us) over the device tasks of ``trace``."""
    spans = [(float(e["ts"]), float(e["ts"]) + float(e["dur"]), w, e["pid"]) for e in trace["traceEvents"]
             if e.get("ph") == "X" and (w := _what(e)) is not None and float(e.get("dur", 0)) > 0]
    if not spans:
        return 0.0, {}, {}
    marks = sorted([(a, 1, w, pid) for a, _, w, pid in spans] + [(b, -1, w, pid) for _, b, w, pid in spans],
                   key=lambda m: m[0])
    parts = dict.fromkeys(ORDER, 0.0)
    busy: dict[int, float] = {}
    kinds: dict[str, int] = {}
    cards: dict[int, int] = {}
    rank = ("compute", "communication not hidden", "host copies in", "host copies out")
    for (t, step, w, pid), nxt in zip(marks, marks[1:] + [marks[-1]]):   # a sweep: what runs until the next mark
        kinds[w] = kinds.get(w, 0) + step
        cards[pid] = cards.get(pid, 0) + step
        gap = nxt[0] - t
        if gap > 0:
            parts[next((k for k in rank if kinds.get(k, 0) > 0), "no card busy")] += gap
            for c, n in cards.items():
                if n > 0:
                    busy[c] = busy.get(c, 0.0) + gap
    return marks[-1][0] - marks[0][0], parts, busy


def parts_doc(trace: dict[str, Any]) -> dict[str, Any]:
    """``run --json``'s keys for several cards: the makespan's parts and each card's idle time."""
    window, parts, busy = makespan_parts(trace)
    return {"makespan_parts_us": {k.replace(" ", "_"): v for k, v in parts.items()},
            "card_idle_us": {str(c): window - b for c, b in sorted(busy.items())}}


def cards_lines(result: Any) -> list[str]:
    """The lines the run summary adds for several cards."""
    s = result.stats
    window, parts, busy = makespan_parts(result.trace)
    lines = [f"  makespan {window:,.1f} us = " + " + ".join(f"{k} {v:,.1f}" for k, v in parts.items())
             + " (each instant counted once, in that order)"]
    idle = ", ".join(f"card {c} {window - b:,.1f} us" for c, b in sorted(busy.items()))
    bubble = s.extra.get("bubble")
    lines.append(f"  idle while another card works: {idle}"
                 + (f"; pipeline bubble {bubble:.1%} of the cards' time" if bubble is not None else ""))
    splits = s.extra.get("tensor_splits")
    if splits is not None:
        lines.append("  " + tensor_line(splits))
    return lines


def tensor_line(report: dict[str, Any], show: int = 3) -> str:
    """What a tensor-parallel run split, and why the rest stayed whole on every card."""
    split, whole = report.get("split", []), report.get("replicated", [])
    head = f"tensor parallel: {len(split)} part(s) split" if split else "tensor parallel: nothing split"
    if not whole:
        return head + ("" if split else ": the graph has no MatMul, Gemm or Conv a card could take a part of")
    reasons = "; ".join(f"{term(x['node'])} ({x['op']}): {term(x['reason'])}" for x in whole[:show])
    more = f"; and {len(whole) - show} more" if len(whole) > show else ""
    return f"{head}, {len(whole)} kept whole: {reasons}{more}"
