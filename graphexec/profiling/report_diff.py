"""The HTML page of two profiles side by side (``graphexec view A B``): ``diff.compare``'s
numbers as one self-contained page, with the report's style and sortable tables."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from graphexec._files import write_atomic
from graphexec.profiling.diff import compare
from graphexec.profiling.report_table import SORT_JS, STYLE, _e, _table
from graphexec.profiling.view_data import load


def _pair(xs: list[Any], fmt: str = "{:,.3f}") -> list[str]:
    return [fmt.format(x) if isinstance(x, (int, float)) else "-" for x in xs]


def render_diff(d: dict[str, Any]) -> str:
    """The page of one comparison (``diff.compare``'s dict)."""
    ops = [[o["op"], *o["calls"], *_pair(o["us"]), f"{o['us'][1] - o['us'][0]:+,.3f}", o["bound"][0] or "?",
            o["bound"][1] or "?"] for o in d["ops"]]
    names = [[n["name"], *n["calls"], *_pair(n["us"]), f"{n['us'][1] - n['us'][0]:+,.3f}"] for n in d["names"]]
    causes = [[c["reason"], *_pair(c["gain"], "{:.2f}x")] for c in d["causes"]]
    numbers = [["makespan (us)", *_pair(d["makespan"])], ["device busy (us)", *_pair(d["busy"])],
               ["device idle (us)", *_pair(d["idle"])], ["waiting on the host (us)", *_pair(d["host_wait"])],
               ["work summed over streams (us)", *_pair(d["work"])], ["what bounds the run", *d["reason"]]]
    parts = ["<h1>graphexec: two profiles side by side</h1>", f"<p>A: {_e(d['a'])}<br>B: {_e(d['b'])}</p>",
             f'<p id="diff-explanation">{_e(d["explanation"])}</p>', "<h2>The runs</h2>",
             _table(["", "A", "B"], numbers, "diff-numbers"),
             "<h2>Op types</h2><p>click a column to sort</p>",
             _table(["op type", "calls A", "calls B", "us A", "us B", "delta us", "bound A", "bound B"], ops,
                    "sortable diff-ops"),
             "<h2>Causes: what removing each would buy</h2>",
             _table(["cause", "gain A", "gain B"], causes, "diff-causes") if causes
             else "<p>no diagnosis on either</p>",
             f"<h2>Ops by name ({len(names)})</h2>",
             _table(["op", "calls A", "calls B", "us A", "us B", "delta us"], names, "sortable diff-names")]
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>graphexec diff</title>'
            f"<style>{STYLE}</style></head><body>{''.join(parts)}<script>{SORT_JS}</script></body></html>")


def write_diff(a: str, b: str, out: str) -> str:
    """Read two profiles, write their comparison to ``out`` (whole or not at all)."""
    page = render_diff(compare(load(a), load(b)))
    write_atomic([(out, lambda p: Path(p).write_text(page, encoding="utf-8"))])
    return out
