"""Where each run of the torch-style profiler's steps sits on trace_view.json's one clock
when Session runs are among them.

A device window's run (eager card, ACL device) keeps its times on its device's clock, and a
Session run's times count from its own start, so the two cannot share a clock as they are.
Step s starts where step s - 1 ended; in it, the device windows keep their places relative
to each other (one shift for all of them: the cards of one server share a clock, so a
collective's parts stay aligned), and the Session runs follow, one after another, in the
order they ran (the cards of one multi-card run together: ``result`` names it). Each run's
extra gets ``begin`` (what is added to its own times) and ``window``, its step's [start,
end] on the one clock.
"""

from __future__ import annotations

from typing import Any, Sequence


def own_span(run: Any) -> tuple[float, float]:
    """A run's [first, last] instant on its own clock: its host launches and device tasks."""
    times = [x for lc in run.launches for x in (lc.start, lc.end)]
    times += [x for t in run.tasks if t.end_t is not None for x in (t.start_t, t.end_t)]
    return (min(times), max(times)) if times else (0.0, 0.0)


def lay_out(runs: Sequence[Any], extras: Sequence[dict[str, Any]]) -> None:
    """Set each extra's ``begin`` and ``window`` (see the module's docstring)."""
    at = 0.0
    for s in sorted({int(e["step"]) for e in extras}):
        ks = [k for k, e in enumerate(extras) if int(e["step"]) == s]
        windows = [k for k in ks if "window" in extras[k] and not extras[k].get("session")]
        lo = min((extras[k]["window"][0] for k in windows), default=0.0)
        hi = max((extras[k]["window"][1] for k in windows), default=0.0)
        for k in windows:
            extras[k]["begin"] = at - lo
        cursor = at + (hi - lo)
        groups: dict[Any, list[int]] = {}   # the cards of one Session result run together
        for k in ks:
            if k not in windows:
                groups.setdefault(extras[k].get("result", ("run", k)), []).append(k)
        for group in groups.values():
            spans = [own_span(runs[k]) for k in group]
            a, b = min(x for x, _ in spans), max(y for _, y in spans)
            for k in group:
                extras[k]["begin"] = cursor - a
            cursor += b - a
        for k in ks:
            extras[k]["window"] = [at, cursor]
        at = cursor
