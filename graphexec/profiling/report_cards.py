"""A multi-card report's per-card views: a selector that shows the whole run or one card in
the memory, op_statistic and op-table sections.

The cards are those the op rows name (``Device_id``: a multi-card ``--profile`` folder's
and a PROF folder's op summaries have it) or that carry a memory summary. The whole run's
view is every card's ops, op types over all of them, and each card's pool side by side
(cards have memories of their own: the run reserves their sum); a card's view is its own
op types, its pool with the tensors live at its peak, and its op rows. Each card's memory
comes from ``otherData.card_memory`` (``export_cards.py``), or in a PROF folder from the
last run on that card that has one.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from graphexec.profiling import report_sections as sections
from graphexec.profiling.report_table import _e, _table
from graphexec.profiling.timeline import device_pid
from graphexec.profiling.view_data import View

SELECT_JS = """(function(){var sel=document.getElementById('card-select');if(!sel)return;
function show(){var v=sel.value;document.querySelectorAll('.per-card').forEach(function(d){
 d.style.display=d.getAttribute('data-card')===v?'':'none';});
 if(window.graphexecFilterOps)window.graphexecFilterOps();}
sel.addEventListener('change',show);show();})();"""


def memories(view: View) -> list[dict[str, Any]]:
    """Each card's memory summary, in device order (``device`` added)."""
    given = view.other.get("card_memory")
    if isinstance(given, list) and given:
        return sorted(given, key=lambda m: int(m["device"]))
    last: dict[int, dict[str, Any]] = {}
    for r in view.runs:
        m = r.get("memory")
        if isinstance(m, dict) and "peak_bytes" in m and r.get("device_id") is not None:
            last[int(r["device_id"])] = {**m, "device": int(r["device_id"]), "step": r.get("step")}
    return [last[d] for d in sorted(last)]


def devices(view: View) -> list[int]:
    """The cards the profile has ops or memory of."""
    ids = {int(r["Device_id"]) for r in view.rows if str(r.get("Device_id", "")).isdigit()}
    return sorted(ids | {int(m["device"]) for m in memories(view)})


def selector(ids: list[int]) -> str:
    options = "".join(f'<option value="{d}">card {d}</option>' for d in ids)
    return ('<p class="card-select">show <select id="card-select"><option value="all">the whole run</option>'
            f"{options}</select> in the memory, op type and operator sections below</p>")


def _view(ids: list[int], whole: str, each: dict[int, str]) -> str:
    return (f'<div class="per-card" data-card="all">{whole}</div>'
            + "".join(f'<div class="per-card" data-card="{d}">{each.get(d, "")}</div>' for d in ids))


def memory(view: View, ids: list[int]) -> str:
    """The whole run's pools side by side, and each card's own."""
    mems = memories(view)
    if not mems:
        return sections.memory(view)
    rows = [[m["device"], int(m["reserved_bytes"]), int(m["peak_bytes"]), f"{float(m['peak_us']):.3f}",
             int(m["live_count"]), int(m.get("ops_allocating", 0))] for m in mems]
    top = max(mems, key=lambda m: int(m["peak_bytes"]))
    whole = (f'<p id="memory-peak">{len(mems)} cards, each its own memory: {sum(r[1] for r in rows):,} bytes '
             f"reserved in all; the highest peak is card {top['device']}'s, {int(top['peak_bytes']):,} bytes at "
             f"{float(top['peak_us']):,.3f} us</p>"
             + _table(["card", "reserved (bytes)", "peak in use (bytes)", "peak at (us)", "tensors live at the peak",
                       "ops allocating"], rows, "sortable card-memory"))
    each = {}
    for m in mems:
        d = int(m["device"])
        card = replace(view, counter_pid=_pid(view, d))
        step = f" (its last run with a memory record: step {m['step']})" if m.get("step") is not None else ""
        each[d] = f"<p>card {d}'s memory{_e(step)}</p>" + sections.planned(card, m, f"memory-peak-card-{d}")
    return _view(ids, whole, each)


def _pid(view: View, d: int) -> int:
    """Card ``d``'s device process: a server trace names it; a PROF timeline's is 2 d + 1."""
    return 2 * d + 1 if view.runs else device_pid({"traceEvents": view.events}, d)


def op_statistic(view: View, ids: list[int]) -> str:
    """Op types over every card's ops, and each card's own."""
    each = {d: sections.op_statistic([r for r in view.rows if str(r.get("Device_id", "")) == str(d)],
                                     "sortable op-statistic-card") for d in ids}
    return _view(ids, sections.op_statistic(view.rows), each)
