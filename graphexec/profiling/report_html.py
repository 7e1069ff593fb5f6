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

from typing import Any, Sequence

from graphexec._render import html
from graphexec.profiling import report_charts as charts
from graphexec.profiling.view_data import View

METRICS = (("makespan_us", "makespan", "{:,.1f} us"), ("cube_utilization", "cube utilization", "{:.1%}"),
           ("vector_utilization", "vector utilization", "{:.1%}"), ("hbm_utilization", "HBM bandwidth", "{:.1%}"),
           ("mean_queue_depth", "mean queue depth", "{:.2f}"), ("max_queue_depth", "max queue depth", "{:d}"),
           ("device_idle_us", "device idle", "{:,.1f} us"), ("host_wait_us", "waiting on the host", "{:,.1f} us"))
OP_COLUMNS = ("Op Name", "OP Type", "Task Type", "Stream ID", "Task Start Time(us)", "Task Duration(us)",
              "Task Wait Time(us)", "Block Dim", "Bound")
STYLE = """body{font-family:sans-serif;margin:1.5em;color:#222}h1{font-size:1.4em}h2{font-size:1.1em;margin-top:1.6em}
.cards{display:flex;flex-wrap:wrap;gap:.6em}.card{border:1px solid #ccc;border-radius:6px;padding:.5em .8em}
.card b{display:block;font-size:1.3em}table{border-collapse:collapse;font-size:.85em}
td,th{border:1px solid #ddd;padding:2px 6px;text-align:left}th{background:#f3f3f3;cursor:pointer}
td.n{text-align:right}.first{background:#fff4d6}svg{max-width:100%;height:auto}"""
SORT_JS = """document.querySelectorAll('table.sortable th').forEach(function(th, i){
  th.addEventListener('click', function(){
    var body = th.closest('table').tBodies[0], rows = Array.from(body.rows);
    var asc = th.dataset.dir !== 'asc'; th.dataset.dir = asc ? 'asc' : 'desc';
    rows.sort(function(a, b){
      var x = a.cells[i].dataset.v || a.cells[i].textContent, y = b.cells[i].dataset.v || b.cells[i].textContent;
      var nx = parseFloat(x), ny = parseFloat(y);
      var c = (!isNaN(nx) && !isNaN(ny)) ? nx - ny : x.localeCompare(y);
      return asc ? c : -c;
    });
    rows.forEach(function(r){ body.appendChild(r); });
  });
});"""


def _e(v: Any) -> str:
    return html(v)   # the one HTML rendering of a name (graphexec/_render.py)


def _table(head: Sequence[str], rows: Sequence[Sequence[Any]], cls: str = "", first: bool = False) -> str:
    def cell(v: Any) -> str:
        num = isinstance(v, (int, float)) or _numeric(v)
        return f'<td class="n" data-v="{_e(v)}">{_e(v)}</td>' if num else f"<td>{_e(v)}</td>"

    body = "".join(f'<tr{" class=first" if first and i == 0 else ""}>{"".join(cell(v) for v in r)}</tr>'
                   for i, r in enumerate(rows))
    ths = "".join(f"<th>{_e(h)}</th>" for h in head)
    return f'<table class="{cls}"><thead><tr>{ths}</tr></thead><tbody>{body}</tbody></table>'


def _numeric(v: Any) -> bool:
    try:
        float(str(v))
        return True
    except ValueError:
        return False


def _metrics(stats: dict[str, Any], view: View) -> str:
    cards = []
    for key, label, fmt in METRICS:
        if key in ("cube_utilization", "vector_utilization"):   # the unit as the profile names it
            label = f"{view.unit(key.split('_')[0])['label']} utilization"
        if stats.get(key) is not None:
            value = fmt.format(int(stats[key]) if fmt == "{:d}" else float(stats[key]))
            cards.append(f'<div class="card">{_e(label)}<b id="metric-{key}">{_e(value)}</b></div>')
    return f'<div class="cards">{"".join(cards)}</div>' if cards else "<p>no stats in this profile</p>"


def _diagnosis(d: dict[str, Any] | None) -> str:
    if not d:
        return "<p>no diagnosis in this profile (a timeline written by an older graphexec)</p>"
    rows = [[i + 1, c["reason"], f"{c['gain']:.2f}x", c["message"]] for i, c in enumerate(d.get("causes", []))]
    ops = ", ".join(f"{o['name']} ({o['op']}, {o['us']:,.1f} us)" for o in d.get("ops", []))
    return (f'<p id="diagnosis-reason"><b>{_e(d["reason"])}</b>: {_e(d["message"])}</p>'
            + (f"<p>ops that matter: {_e(ops)}</p>" if ops else "")
            + _table(["rank", "bound", "gain", "what bounds the run, and what removing it would buy"], rows,
                     "causes", first=True))


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


def _ops(rows: list[dict[str, Any]]) -> str:
    cols = [c for c in OP_COLUMNS if rows and c in rows[0]]
    return _table(cols, [[r.get(c, "") for c in cols] for r in rows], "sortable ops")


def _runs(runs: list[dict[str, Any]]) -> str:
    if len(runs) < 2:
        return ""
    rows = [[r["run"], r.get("model", ""), r.get("device_id", ""),
             f"{r['stats']['makespan_us']:.3f}" if r.get("stats") else "", "yes" if r.get("diagnosis") else ""]
            for r in runs]
    return "<h2>Runs in this profile</h2>" + _table(["run", "model", "device", "makespan (us)", "diagnosed"], rows)


def _calibration(device: object) -> str:
    """Whether the device profile the times come from is calibrated, and against what."""
    from graphexec.runtime.profiles import builtin_profiles
    from graphexec.runtime.provenance import note

    profile = builtin_profiles().get(str(device))
    text = note(profile.sources) if profile is not None else "a profile of its own: its sources are in its YAML"
    return f"<p>device profile {_e(str(device))}: {_e(text)}</p>"


def render(view: View) -> str:
    """The whole page for ``view``."""
    other, stats = view.other, view.stats
    end = max((e["ts"] + e.get("dur", 0.0) for e in view.events if e.get("ph") == "X"), default=0.0)
    peak = other.get("peak", {})
    title = f"graphexec profile: {other.get('model', '')} on {other.get('device', '?')}"
    parts = [f"<h1>{_e(title)}</h1><p>from {_e(view.source)}</p>", _calibration(other.get("device")),
             "<h2>Key metrics</h2>", _metrics(stats, view),
             charts.utilization(view.cores(), view.hbm(), peak, end),
             "<h2>Task-queue depth</h2>", charts.queue_depth(view.queue(), peak.get("queue_depth"), end),
             "<h2>Streams and devices</h2>", charts.gantt(view.events, "kernels by unit; ^ record, v wait"),
             "<h2>Actions: settings ranked by measured gain</h2>", _actions(view.diagnosis),
             "<h2>Diagnosis: what bounds the run</h2>", _diagnosis(view.diagnosis),
             "<h2>Idle time per stream</h2>", _idle(view.diagnosis),
             "<h2>Launches and queues</h2>", _launches(view.diagnosis),
             f"<h2>Operators ({len(view.rows)})</h2><p>click a column to sort</p>", _ops(view.rows), _runs(view.runs)]
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{_e(title)}</title>'
            f"<style>{STYLE}</style></head><body>{''.join(parts)}<script>{SORT_JS}</script></body></html>")


def write_report(source: str, out: str) -> str:
    """Read the profile at ``source``, write the report to ``out`` (whole or not at all)."""
    from pathlib import Path

    from graphexec._files import write_atomic
    from graphexec.profiling.view_data import load

    page = render(load(source))
    write_atomic([(out, lambda p: Path(p).write_text(page, encoding="utf-8"))])
    return out
