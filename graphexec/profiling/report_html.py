"""The HTML report ``graphexec view`` writes: one self-contained file, nothing fetched.

The article opens its profile with ``msprof --view`` and reads the key metrics first:
cube and vector utilization against peak, HBM bandwidth utilization, task-queue depth.
The report shows those (as numbers and over time), the Gantt of streams and devices with
their events, the op table (sortable: a few lines of inline script), the idle-time
breakdown per stream, the actions ranked by measured gain (each with its flag and Session
option) and the diagnosis of what bounds the run. Charts are matplotlib SVG written into
the page: no JavaScript library, no network, and text in the charts stays text.
"""

from __future__ import annotations

import os
import re
from typing import Any
from urllib.parse import quote

from graphexec.profiling import report_cards as cards
from graphexec.profiling import report_charts as charts
from graphexec.profiling import report_sections as sections
from graphexec.profiling import report_timeline as timeline
from graphexec.profiling.report_table import SORT_JS, STYLE, _e, _table
from graphexec.profiling.view_data import View

METRICS = (("makespan_us", "makespan", "{:,.1f} us"), ("cube_utilization", "cube utilization", "{:.1%}"),
           ("vector_utilization", "vector utilization", "{:.1%}"), ("hbm_utilization", "HBM bandwidth", "{:.1%}"),
           ("mean_queue_depth", "mean queue depth", "{:.2f}"), ("max_queue_depth", "max queue depth", "{:d}"),
           ("device_idle_us", "device idle", "{:,.1f} us"), ("host_wait_us", "waiting on the host", "{:,.1f} us"))
OP_COLUMNS = ("Op Name", "OP Type", "Task Type", "Stream ID", "Task Start Time(us)", "Task Duration(us)",
              "Task Wait Time(us)", "Block Dim", "Bound")
def _metrics(stats: dict[str, Any], view: View) -> str:
    cards = []
    for key, label, fmt in METRICS:
        if key in ("cube_utilization", "vector_utilization"):   # the unit as the profile names it
            label = f"{view.unit(key.split('_')[0])['label']} utilization"
        if stats.get(key) is not None:
            value = fmt.format(int(stats[key]) if fmt == "{:d}" else float(stats[key]))
            cards.append(f'<div class="card">{_e(label)}<b id="metric-{key}">{_e(value)}</b></div>')
    return f'<div class="cards">{"".join(cards)}</div>' if cards else "<p>no stats in this profile</p>"


def _diagnosis(d: dict[str, Any] | None, rid: str = "diagnosis-reason") -> str:
    if not d:
        return "<p>no diagnosis in this profile (a timeline written by an older graphexec)</p>"
    rows = [[i + 1, c["reason"], f"{c['gain']:.2f}x", c["message"]] for i, c in enumerate(d.get("causes", []))]
    ops = ", ".join(f"{o['name']} ({o['op']}, {o['us']:,.1f} us)" for o in d.get("ops", []))
    return (f'<p id="{rid}"><b>{_e(d["reason"])}</b>: {_e(d["message"])}</p>'
            + (f"<p>ops that matter: {_e(ops)}</p>" if ops else "")
            + _table(["rank", "bound", "gain", "what bounds the run, and what removing it would buy"], rows,
                     "causes", first=True))


def _card_diagnoses(each: list[dict[str, Any]], crit: Any) -> list[str]:
    """A multi-card run's per-card diagnosis sections, each made on that card's own run."""
    out = []
    for d in each:
        c = int(d["device"])
        note = " (critical: it bounds the makespan)" if c == crit else ""
        out.append(f'<h2 id="diagnosis-card-{c}">Diagnosis of card {c}{note}</h2>'
                   + _diagnosis(d, f"diagnosis-reason-card-{c}"))
    return out


def _actions(d: dict[str, Any] | None) -> str:
    """The settings to change, best first, each with its measured gain, flag and Session option."""
    if not d or "actions" not in d:
        return ("<p>no actions in this profile: an action is measured by compiling the plan again, and an eager "
                "or ACL run has none (or an older graphexec wrote the timeline)</p>")
    if not d["actions"]:
        return '<p id="actions-none">no setting measured buys 5% or more (or it is already in effect)</p>'
    rows = [[a["name"], f"{a['gain']:.2f}x", f"{a['makespan_us']:,.3f}", a["flag"], a["option"], a["caveat"]]
            for a in d["actions"]]
    return _table(["action", "gain", "makespan with it (us)", "command line", "Session option", "note"], rows,
                  "actions", first=True)


def _idle(d: dict[str, Any] | None) -> str:
    idle = (d or {}).get("analyses", {}).get("idle")
    if not idle:
        return "<p>no idle-time breakdown in this profile</p>"
    rows = [[f"stream {s}", f"{v['idle_us']:.3f}", f"{v['host_wait_us']:.3f}", f"{v['kernel_wait_us']:.3f}",
             f"{v['other_us']:.3f}"] for s, v in sorted(idle.items(), key=lambda kv: int(kv[0]))]
    cp = d["analyses"].get("critical_path", {}) if d else {}
    path = (f"<p>critical path: {len(cp.get('tasks', []))} tasks, {cp.get('kernel_us', 0):,.1f} us in kernels, "
            f"{cp.get('sync_edges', 0)} sync edges, {cp.get('launch_us', 0):,.1f} us in host launches, "
            f"{cp.get('queue_blocks', 0)} waits for a full queue</p>") if cp else ""
    return _table(["stream", "idle (us)", "host wait (us)", "kernel wait (us)", "other (us)"], rows, "idle") + path


def _launches(d: dict[str, Any] | None) -> str:
    """HTA's short-kernel launch statistics and the queue-length summary per stream."""
    a = (d or {}).get("analyses", {})
    if not a.get("launch"):
        return ""
    lc = a["launch"]
    text = (f"<p>{int(lc['kernels'])} kernels, {int(lc['short_kernels'])} shorter than their host launch "
            f"({lc['short_kernel_us']:,.1f} us in all); median kernel {lc['median_kernel_us']:,.2f} us, launch "
            f"delay mean {lc['mean_launch_delay_us']:,.2f} us, max {lc['max_launch_delay_us']:,.2f} us</p>")
    rows = [[f"stream {s}", f"{q['mean']:.2f}", int(q["max"]), f"{q['blocked_us']:.3f}", "yes" if q["full"] else ""]
            for s, q in sorted(a.get("queues", {}).items(), key=lambda kv: int(kv[0]))]
    return text + _table(["stream", "mean queue", "max queue", "host blocked (us)", "filled"], rows, "queues")


def _ops(rows: list[dict[str, Any]], multi: bool = False) -> str:
    cols = [c for c in (("Device_id",) if multi else ()) + OP_COLUMNS if rows and c in rows[0]]
    return _table(cols, [[r.get(c, "") for c in cols] for r in rows], "sortable ops")


def _calibration(device: object) -> str:
    """Whether the device profile the times come from is calibrated, and against what."""
    from graphexec.runtime.profiles import builtin_profiles
    from graphexec.runtime.provenance import note

    profile = builtin_profiles().get(str(device))
    text = note(profile.sources) if profile is not None else "a profile of its own: its sources are in its YAML"
    return f"<p>device profile {_e(str(device))}: {_e(text)}</p>"


def perfetto(link: str | None) -> str:
    """Where the whole trace is, and how to open it in Perfetto (a link beside the report,
    nothing fetched: Perfetto's page reads a file it is given in the browser)."""
    if not link:
        return ""
    name = link.replace("\\", "/").rsplit("/", 1)[-1]
    return (f'<p id="perfetto">the whole trace: <a href="{_e(quote(link))}" download>{_e(name)}</a> (beside this '
            "report). To open it in Perfetto, go to ui.perfetto.dev, choose Open trace file and pick it (or drop "
            "it on that page); Perfetto reads it in the browser. chrome://tracing opens it too.</p>")


def render(view: View, trace_link: str | None = None) -> str:
    """The whole page for ``view``; ``trace_link``: the trace file's path from the report's folder."""
    other, stats = view.other, view.stats
    ids = cards.devices(view)
    multi = len(ids) > 1
    end = max((e["ts"] + e.get("dur", 0.0) for e in view.events if e.get("ph") == "X"), default=0.0)
    peak = other.get("peak", {})
    title = f"graphexec profile: {_subject(other, stats)}"
    crit = ((view.diagnosis or {}).get("analyses") or {}).get("critical_card")
    card0 = ("" if not sections.multi_card(stats) else " (card 0's: the diagnosis is made on card 0's plan)"
             if crit is None else f" (card {crit}'s: the card that bounds the makespan)")
    parts = [f"<h1>{_e(title)}</h1><p>from {_e(view.source)}</p>", _calibration(other.get("device")),
             "<h2>Key metrics</h2>", _metrics(stats, view),
             sections.cards(view, end) if sections.multi_card(stats)
             else charts.utilization(view.cores(), view.hbm(), peak, end),
             "<h2>Timeline</h2>", timeline.section(view), perfetto(trace_link),
             "<h2>Task-queue depth</h2>", charts.queue_depth(view.queue(), peak.get("queue_depth"), end),
             "<h2>Streams and devices</h2>", charts.gantt(view.events, "kernels by unit; ^ record, v wait"),
             f"<h2>Actions: settings ranked by measured gain{card0}</h2>", _actions(view.diagnosis),
             f"<h2>Diagnosis: what bounds the run{card0}</h2>", _diagnosis(view.diagnosis),
             *_card_diagnoses(other.get("card_diagnoses") or [], crit),
             f"<h2>Idle time per stream{card0}</h2>", _idle(view.diagnosis),
             f"<h2>Launches and queues{card0}</h2>", _launches(view.diagnosis),
             "<h2>HCCL and links between cards</h2>", sections.hccl(view),
             *(["<h2>Each card</h2>", cards.selector(ids)] if multi else []),
             "<h2>Memory</h2>", cards.memory(view, ids) if multi else sections.memory(view),
             "<h2>Op types (op_statistic)</h2>",
             cards.op_statistic(view, ids) if multi else sections.op_statistic(view.rows),
             f"<h2>Operators ({len(view.rows)})</h2>", sections.op_filter(len(view.rows)), _ops(view.rows, multi),
             sections.steps(view.runs)]
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{_e(title)}</title>'
            f"<style>{STYLE}</style></head><body>{''.join(parts)}"
            f"<script>{SORT_JS}\n{sections.FILTER_JS}\n{cards.SELECT_JS}</script></body></html>")


def _subject(other: dict[str, Any], stats: dict[str, Any]) -> str:
    """What ran where: a multi-card run is named as the whole run, not as its card 0 (whose
    graph a pipeline names after its stage)."""
    model, device = str(other.get("model", "")), other.get("device", "?")
    n = stats.get("num_devices") or 0
    if n and int(n) > 1:
        if stats.get("parallel") == "pipeline":
            model = re.sub(r"\.stage\d+$", "", model)
        return f"{model} on {int(n)} x {device} ({stats.get('parallel', '?')} parallel)"
    return f"{model} on {device}"


def write_report(source: str, out: str) -> str:
    """Read the profile at ``source``, write the report to ``out`` (whole or not at all)."""
    from pathlib import Path

    from graphexec._files import write_atomic
    from graphexec.profiling.view_data import load

    view = load(source)
    link = os.path.relpath(view.source, os.path.dirname(os.path.abspath(out)))
    page = render(view, link)
    write_atomic([(out, lambda p: Path(p).write_text(page, encoding="utf-8"))])
    return out
