"""Two profiles side by side (``graphexec diff A B``, ``graphexec view A B``): op by op, cause
by cause, and the makespan difference taken apart, as msprof-analyze's compare and HTA's
TraceDiff do.

Each side is the run its report shows (the diagnosed one): its device's kernels, copies and
collectives (a multi-step timeline: that run's step only). The makespan is the device's
busy time (the union of its work) plus its idle time, so the difference splits exactly
into the two; busy time moves with the work's own time (summed over streams, per op type)
and with how much of it overlaps (that sum over the busy time). Bound is the op summary's
roofline column where the profile has one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from graphexec.profiling.view_data import View

WORK = ("kernel", "memcpy", "hccl")
TOP = 8


@dataclass
class Side:
    """One profile's numbers for the comparison."""

    source: str
    makespan: float
    idle: float
    host_wait: float
    ops: dict[str, list[float]] = field(default_factory=dict)     # op type -> [calls, us]
    names: dict[str, list[float]] = field(default_factory=dict)   # op name -> [calls, us]
    bound: dict[str, str] = field(default_factory=dict)           # op type -> its bound by most time
    causes: dict[str, tuple[float, float]] = field(default_factory=dict)   # reason -> (gain, counterfactual us)
    reason: str = ""

    @property
    def work(self) -> float:
        return sum(us for _, us in self.ops.values())


def _events(view: View) -> list[dict[str, Any]]:
    pid, step = view.other.get("device_pid"), view.other.get("step")
    return [e for e in view.events if e.get("ph") == "X" and e.get("cat") in WORK
            and (pid is None or e.get("pid") == pid) and (step is None or e.get("args", {}).get("step") == step)]


def _bounds(view: View) -> dict[str, str]:
    """Op type -> the roofline bound of most of its time (op summaries that have the column)."""
    time: dict[str, dict[str, float]] = {}
    for r in view.rows:
        if r.get("Bound"):
            per = time.setdefault(str(r["OP Type"]), {})
            per[str(r["Bound"])] = per.get(str(r["Bound"]), 0.0) + float(r.get("Task Duration(us)") or 0.0)
    return {op: max(per, key=lambda b: per[b]) for op, per in time.items()}


def side(view: View) -> Side:
    """What the comparison reads of one loaded profile."""
    stats = view.stats
    events = _events(view)
    lo = min((e["ts"] for e in events), default=0.0)
    hi = max((e["ts"] + e["dur"] for e in events), default=0.0)
    s = Side(view.source, float(stats.get("makespan_us", hi - lo)), float(stats.get("device_idle_us", 0.0)),
             float(stats.get("host_wait_us", 0.0)), bound=_bounds(view))
    for e in events:
        op = str(e.get("args", {}).get("op") or ("MemcpyAsync" if e["cat"] == "memcpy" else e["cat"]))
        for table, key in ((s.ops, op), (s.names, str(e["name"]))):
            entry = table.setdefault(key, [0, 0.0])
            entry[0] += 1
            entry[1] += float(e["dur"])
    d = view.diagnosis or {}
    s.reason = str(d.get("reason", ""))
    for c in d.get("causes", []):
        s.causes[c["reason"]] = (float(c["gain"]), float(c.get("numbers", {}).get("counterfactual_us", 0.0)))
    return s


def compare(a: View, b: View) -> dict[str, Any]:
    """The comparison of ``a`` (before) and ``b`` (after), JSON-ready."""
    sa, sb = side(a), side(b)
    ops = sorted(set(sa.ops) | set(sb.ops), key=lambda k: -abs(_us(sb.ops, k) - _us(sa.ops, k)))
    names = sorted(set(sa.names) | set(sb.names), key=lambda k: -abs(_us(sb.names, k) - _us(sa.names, k)))
    return {"a": sa.source, "b": sb.source,
            "makespan": [sa.makespan, sb.makespan], "idle": [sa.idle, sb.idle],
            "host_wait": [sa.host_wait, sb.host_wait],
            "busy": [sa.makespan - sa.idle, sb.makespan - sb.idle], "work": [sa.work, sb.work],
            "ops": [{"op": k, "calls": [_calls(sa.ops, k), _calls(sb.ops, k)], "us": [_us(sa.ops, k), _us(sb.ops, k)],
                     "bound": [sa.bound.get(k, ""), sb.bound.get(k, "")]} for k in ops],
            "names": [{"name": k, "calls": [_calls(sa.names, k), _calls(sb.names, k)],
                       "us": [_us(sa.names, k), _us(sb.names, k)]} for k in names],
            "causes": [{"reason": r, "gain": [sa.causes.get(r, (None,))[0], sb.causes.get(r, (None,))[0]]}
                       for r in sorted(set(sa.causes) | set(sb.causes))],
            "reason": [sa.reason, sb.reason], "explanation": explain(sa, sb)}


def _us(table: dict[str, list[float]], key: str) -> float:
    return table[key][1] if key in table else 0.0


def _calls(table: dict[str, list[float]], key: str) -> int:
    return int(table[key][0]) if key in table else 0


def explain(a: Side, b: Side) -> str:
    """The makespan difference in words: busy and idle parts, the op types that moved the
    work, and the overlap."""
    dm = b.makespan - a.makespan
    speed = f"{a.makespan / b.makespan:.2f}x" if b.makespan > 0 else "n/a"
    busy_a, busy_b = a.makespan - a.idle, b.makespan - b.idle
    text = (f"makespan {a.makespan:,.3f} -> {b.makespan:,.3f} us ({dm:+,.3f} us; A/B {speed}): device busy "
            f"{busy_a:,.3f} -> {busy_b:,.3f} us ({busy_b - busy_a:+,.3f}), idle {a.idle:,.3f} -> {b.idle:,.3f} us "
            f"({b.idle - a.idle:+,.3f}; waiting on the host {a.host_wait:,.3f} -> {b.host_wait:,.3f}).")
    moved = sorted(set(a.ops) | set(b.ops), key=lambda k: -abs(_us(b.ops, k) - _us(a.ops, k)))[:TOP // 2]
    parts = [f"{k} {_us(b.ops, k) - _us(a.ops, k):+,.3f} us ({_calls(a.ops, k)} -> {_calls(b.ops, k)} calls)"
             for k in moved if abs(_us(b.ops, k) - _us(a.ops, k)) > 1e-9]
    text += (f" Work summed over streams {a.work:,.3f} -> {b.work:,.3f} us ({b.work - a.work:+,.3f})"
             + (": " + ", ".join(parts) if parts else "") + ".")
    if busy_a > 0 and busy_b > 0:
        text += f" Overlap (work / busy time) {a.work / busy_a:.2f} -> {b.work / busy_b:.2f}."
    if a.reason or b.reason:
        text += f" What bounds the run: {a.reason or '?'} -> {b.reason or '?'}."
    return text


def compare_text(d: dict[str, Any], top: int = TOP) -> str:
    """The comparison as terminal text (``graphexec diff``)."""
    lines = [f"A: {d['a']}", f"B: {d['b']}", d["explanation"], "",
             f"{'op type':<24}{'calls A':>8}{'calls B':>8}{'us A':>12}{'us B':>12}{'delta us':>12}  bound A -> B"]
    for o in d["ops"][:top]:
        lines.append(f"{o['op'][:23]:<24}{o['calls'][0]:>8}{o['calls'][1]:>8}{o['us'][0]:>12,.3f}{o['us'][1]:>12,.3f}"
                     f"{o['us'][1] - o['us'][0]:>+12,.3f}  {o['bound'][0] or '?'} -> {o['bound'][1] or '?'}")
    if d["causes"]:
        lines += ["", f"{'cause':<12}{'gain A':>10}{'gain B':>10}"]
        for c in d["causes"]:
            ga, gb = (f"{g:.2f}x" if g is not None else "-" for g in c["gain"])
            lines.append(f"{c['reason']:<12}{ga:>10}{gb:>10}")
    return "\n".join(lines)
