"""The report's sections beyond the run's own numbers: op_statistic, the op table's filter,
memory, HCCL and links, steps, and cards.

- op_statistic: msprof's per-OP-Type table from the page's op rows;
- memory: the pool reserved and in use over time, the peak with the tensors live at it and
  the bytes each op allocates (``otherData.memory``, ``memory_view.py``; for an eager card
  from its allocator's blocks and the launch each was taken for), or an eager run's
  caching-allocator samples (allocated, reserved) when the torch-style profiler kept them;
- HCCL and links: bytes, busy time and bandwidth per link (copies between cards and
  collectives), and each collective's wait against transit: every rank's part starts when
  it reaches its stream's head and all end together, so a rank waits from its start to the
  last rank's, and the transfer runs from there to the end;
- steps: each run of a multi-step profile with its own numbers; cards: each card of a
  multi-card run (``stats.per_device``) beside the whole run's (the per-card views of
  memory, op types and ops: ``report_cards.py``).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace
from typing import Any

from graphexec.profiling import report_charts as charts
from graphexec.profiling.report_table import _table
from graphexec.profiling.timeline import device_pid
from graphexec.profiling.view_data import View

FILTER_JS = """(function(){var box=document.getElementById('op-filter');if(!box)return;
var rows=Array.from(document.querySelectorAll('table.ops tbody tr')),count=document.getElementById('op-count');
var head=document.querySelector('table.ops thead tr'),col=-1;
if(head)Array.from(head.cells).forEach(function(th,i){if(th.textContent==='Device_id')col=i;});
function apply(){var q=box.value.toLowerCase(),sel=document.getElementById('card-select'),
 card=sel?sel.value:'all',n=0;rows.forEach(function(r){var on=(!q||r.textContent.toLowerCase().indexOf(q)>=0)
 &&(card==='all'||col<0||r.cells[col].textContent===card);r.style.display=on?'':'none';if(on)n++;});
 count.textContent=n+' of '+rows.length+' ops shown';}
box.addEventListener('input',apply);window.graphexecFilterOps=apply;})();"""


def _f(v: Any) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return 0.0


def op_statistic(rows: list[dict[str, Any]], cls: str = "sortable op-statistic") -> str:
    """Per op type: count, total, mean, min and max time and share, most time first."""
    groups: dict[str, list[float]] = defaultdict(list)
    for r in rows:
        groups[str(r.get("OP Type", ""))].append(_f(r.get("Task Duration(us)")))
    total = sum(sum(d) for d in groups.values()) or 1.0
    table = [[op, len(d), f"{sum(d):.3f}", f"{sum(d) / len(d):.3f}", f"{min(d):.3f}", f"{max(d):.3f}",
              f"{100 * sum(d) / total:.2f}"] for op, d in sorted(groups.items(), key=lambda kv: -sum(kv[1]))]
    head = ["OP Type", "Count", "Total Time(us)", "Avg Time(us)", "Min Time(us)", "Max Time(us)", "Ratio(%)"]
    return _table(head, table, cls) if table else "<p>no ops in this profile</p>"


def op_filter(n: int) -> str:
    return (f'<p><input id="op-filter" type="search" placeholder="filter ops by any text (name, type, stream, '
            f'bound)" size="50"> <span id="op-count">{n} of {n} ops shown</span>; click a column to sort</p>')


def memory(view: View) -> str:
    m = view.other.get("memory")
    if isinstance(m, dict) and "peak_bytes" in m:
        return planned(view, m)
    samples = [s for r in view.runs for s in (r.get("memory_samples") or [])] or view.other.get("memory_samples")
    if samples:
        peak = max(samples, key=lambda s: s[1])
        return (f'<p id="memory-peak">caching allocator: peak allocated {peak[1]:,} bytes at {peak[0]:,.3f} us '
                f"(reserved then {peak[2]:,})</p>"
                + charts.memory([(s[0], s[1]) for s in samples], [(s[0], s[2]) for s in samples]))
    return ("<p>no memory record in this profile (a run with a memory plan has one; eager runs with "
            "profile_memory=True)</p>")


def planned(view: View, m: dict[str, Any], rid: str = "memory-peak") -> str:
    """A run's memory: its plan's activation pool (or an eager card's allocator), with the
    peak paragraph's id ``rid`` (a multi-card page has one per card)."""
    if m.get("eager"):   # a caching allocator's blocks, each with the op it was taken for
        return _eager(m, rid)
    pool = view.counter("activation pool (bytes in use)", "bytes")
    return (f'<p id="{rid}">activation pool: {int(m["reserved_bytes"]):,} bytes reserved (the memory plan), peak '
            f'in use {int(m["peak_bytes"]):,} bytes at {float(m["peak_us"]):,.3f} us with {int(m["live_count"])} '
            "tensors live</p>"
            + (charts.memory(pool, [(pool[0][0], m["reserved_bytes"])]) if pool else "") + _tables(m))


def _tables(m: dict[str, Any]) -> str:
    """The tensors live at the peak and the bytes each op allocates (a plan's or an eager card's)."""
    live = [[n, b, op] for n, b, op in m["live"]]
    ops = [[name, op, b, k] for name, op, b, k in m["per_op"]]
    more = m["live_count"] - len(live)
    return ("<h3>Tensors live at the peak</h3>" + _table(["tensor", "bytes", "written by"], live, "sortable live")
            + (f"<p>and {more} more</p>" if more > 0 else "")
            + f"<h3>Bytes allocated per op ({m['ops_allocating']} ops allocate)</h3>"
            + _table(["op", "type", "bytes", "tensors"], ops, "sortable per-op-memory"))


def _eager(m: dict[str, Any], rid: str) -> str:
    """An eager card's memory: the allocator over host time, then the same tables as a plan's."""
    s = m["samples"]
    head = (f'<p id="{rid}">caching allocator: peak held {m["peak_bytes"]:,} bytes at {m["peak_us"]:,.3f} us '
            f'(host time) in {m["live_count"]} blocks, reserved then {m["reserved_bytes"]:,}</p>'
            + charts.memory([(t, a) for t, a, _ in s], [(t, r) for t, _, r in s]))
    return head + _tables(m)


def hccl(view: View) -> str:
    """Per link: bytes, busy time, bandwidth; per collective: wait against transit."""
    links: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
    parts: dict[tuple[str, float], list[dict[str, Any]]] = defaultdict(list)
    # a PROF timeline lays each card's run at its step's start: a rank's own clock is ts - start
    start = {r.get("step"): _f(r.get("start_us")) for r in view.runs}
    for e in view.events:
        if e.get("ph") != "X":
            continue
        a = e.get("args", {})
        if e.get("cat") == "hccl":
            shift = start.get(a.get("step"), 0.0)
            parts[(str(e["name"]), round(e["ts"] + e["dur"] - shift, 6))].append({**e, "ts": e["ts"] - shift})
        link = a.get("link") or a.get("links")
        if e.get("cat") in ("hccl", "memcpy") and link:
            key = ", ".join(map(str, link)) if isinstance(link, list) else str(link)
            entry = links[key]
            entry[0] += _f(a.get("bytes"))
            entry[1] += _f(e.get("dur"))
            entry[2] += 1
    if not links and not parts:
        return "<p>no collectives or copies between cards in this profile</p>"
    rows = [[k, int(n), f"{b:,.0f}", f"{us:,.3f}", f"{b / us / 1e3:,.2f}" if us > 0 else "-"]
            for k, (b, us, n) in sorted(links.items())]
    out = _table(["link", "transfers", "bytes", "busy (us)", "GB/s"], rows, "links") if rows else ""
    coll = []
    for (name, end), es in sorted(parts.items(), key=lambda kv: kv[0][1]):
        last = max(e["ts"] for e in es)
        wait = sum(last - e["ts"] for e in es)
        coll.append([name, len(es), f"{_f(es[0].get('args', {}).get('bytes')):,.0f}", f"{wait:,.3f}",
                     f"{end - last:,.3f}"])
    if coll:
        out += "<h3>Collectives: wait against transit</h3>" + _table(
            ["collective", "ranks", "bytes", "wait, all ranks (us)", "transit (us)"], coll, "collectives")
    return out


def steps(runs: list[dict[str, Any]]) -> str:
    """Each run of the profile (a step, or a card of one) with its own numbers."""
    if len(runs) < 2:
        return ""
    rows = []
    for r in runs:
        s = r.get("stats") or {}
        nums = [f"{_f(s.get('makespan_us')):.3f}", f"{_f(s.get('cube_utilization')):.1%}",
                f"{_f(s.get('hbm_utilization')):.1%}", f"{_f(s.get('device_idle_us')):.3f}"] if s else [""] * 4
        rows.append([r.get("step", r["run"]), r.get("device_id", ""), r.get("model", ""), *nums,
                     (r.get("diagnosis") or {}).get("reason", "")])
    return "<h2>Steps</h2>" + _table(["step", "device", "model", "makespan (us)", "cube", "HBM", "idle (us)",
                                      "bound by"], rows, "sortable steps")


def multi_card(stats: dict[str, Any]) -> bool:
    return len(stats.get("per_device") or []) > 1


def cards(view: View, end: float) -> str:
    """A multi-card run's cards, each with its own numbers and utilization over time, below
    the whole run's numbers."""
    stats = view.stats
    per = stats.get("per_device") or []
    if len(per) < 2:
        return ""
    rows = [[d.get("device"), f"{_f(d.get('makespan_us')):.3f}", f"{_f(d.get('compute_us')):.3f}",
             f"{_f(d.get('cube_utilization')):.1%}", f"{_f(d.get('vector_utilization')):.1%}",
             f"{_f(d.get('hbm_utilization')):.1%}", int(_f(d.get('comm_bytes'))), f"{_f(d.get('comm_us')):.3f}",
             f"{_f(d.get('comm_hidden')):.0%}"] for d in per]
    charts_per_card = ""
    for d in per:
        pid = device_pid({"traceEvents": view.events}, int(_f(d.get("device"))))
        card = replace(view, counter_pid=pid)
        charts_per_card += (f'<h3 id="card-{int(_f(d.get("device")))}">card {d.get("device")}</h3>'
                            + charts.utilization(card.cores(), card.hbm(), view.other.get("peak", {}), end))
    return ("<h2>Cards</h2><p>the key metrics above are the whole run's; each card's own:</p>"
            + _table(["card", "makespan (us)", "compute (us)", "cube", "vector", "HBM", "comm bytes", "comm (us)",
                      "comm hidden"], rows, "sortable cards") + charts_per_card)
