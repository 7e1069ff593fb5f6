"""Terminal output through rich: tables, the run summary's profile lines, and a progress
bar. Colour and the bar only on a terminal; into a pipe or a CI log the same tables come
out as plain aligned text (no escape codes) and the bar draws nothing.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import sys
import textwrap
from typing import IO, Any, Sequence

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
from rich.progress import Progress as RichProgress
from rich.table import Table
from rich.text import Text

from graphexec._render import term
from graphexec.profiling.cards_diagnosis import verdict_lines

PLAIN_WIDTH = 1000     # a pipe has no width: never wrap a row
# a header rule of dashes and nothing else: what plain text tables have always looked like
RULE = box.Box("    \n    \n    \n    \n    \n    \n    \n    \n", ascii=True)
HEAD_RULE = box.Box("    \n    \n -  \n    \n    \n    \n    \n    \n", ascii=True)


def on_terminal(stream: IO[str] | None = None) -> bool:
    """Whether ``stream`` (stdout by default) is a terminal that wants colour (NO_COLOR honoured)."""
    s = stream if stream is not None else sys.stdout
    return bool(getattr(s, "isatty", lambda: False)()) and "NO_COLOR" not in os.environ


def render(renderable: Any, stream: IO[str] | None = None, indent: str = "") -> str:
    """``renderable`` as text for ``stream``: styled and fitted to the terminal's width, or plain."""
    tty = on_terminal(stream)
    width = shutil.get_terminal_size((100, 24)).columns - len(indent) if tty else PLAIN_WIDTH
    buf = io.StringIO()
    Console(file=buf, width=max(40, width), force_terminal=tty, color_system="auto" if tty else None,
            no_color=not tty, highlight=False).print(renderable)
    return "\n".join(indent + line.rstrip() for line in buf.getvalue().rstrip("\n").splitlines())


def table(head: Sequence[str], rows: Sequence[Sequence[Any]], indent: str = "", stream: IO[str] | None = None) -> str:
    """Columns sized to their cells (numbers right-aligned, text left), a dashed rule under
    the header; on a terminal the header is bold and wide tables fold to fit."""
    cells = [[term(c) for c in row] for row in rows]   # names: escaped for the terminal
    numeric = [bool(cells) and all(_is_number(r[i]) for r in cells) for i in range(len(head))]
    t = Table(box=HEAD_RULE, show_edge=False, pad_edge=False, padding=(0, 0, 0, 1), collapse_padding=True,
              header_style="bold" if on_terminal(stream) else "", show_lines=False)
    for h, num in zip(head, numeric):
        t.add_column(Text(h), justify="right" if num else "left", no_wrap=not on_terminal(stream))
    for r in cells:
        t.add_row(*(Text(c) for c in r))   # cells are text, not rich markup ("x[bold]y" stays as it is)
    return render(t, stream, indent)


NUMBER = re.compile(r"-?[\d,]*\.?\d+(%|x)?( [A-Za-z]+)?")   # 1,234.5  12%  1.20x  0.67 MiB


def _is_number(text: str) -> bool:
    return NUMBER.fullmatch(text) is not None


class Progress:
    """A rich progress bar (``3/8 streams=4``, elapsed time) on stderr, rewritten in place.

    Silent unless the stream is a terminal, so redirected output never carries it.
    Use as a context manager; the bar is erased when the work is done.
    """

    def __init__(self, total: int, stream: IO[str] | None = None, enabled: bool | None = None) -> None:
        self.total = max(1, total)
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = on_terminal(self.stream) if enabled is None else enabled
        self._bar: RichProgress | None = None
        if self.enabled:
            console = Console(file=self.stream, force_terminal=True, width=shutil.get_terminal_size((100, 24)).columns)
            self._bar = RichProgress(BarColumn(bar_width=24), MofNCompleteColumn(), TextColumn("{task.description}"),
                                     TimeElapsedColumn(), console=console, transient=True, auto_refresh=False)
            self._task = self._bar.add_task("", total=self.total)
            self._bar.start()

    def update(self, done: int, what: str = "") -> None:
        """Show ``done`` of ``total`` steps finished, ``what`` being worked on now."""
        if self._bar is not None:
            self._bar.update(self._task, completed=min(done, self.total), description=escape(term(what)))
            self._bar.refresh()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def profile_lines(stats: Any) -> list[str]:
    """The run summary's lines on utilization, queues and idle time."""
    return [f"  utilization: {_units(stats)}, HBM bandwidth {stats.hbm_utilization:.1%} of peak",
            f"  command queues: mean depth {stats.mean_queue_depth:.1f}, max {stats.max_queue_depth} tasks; "
            f"device idle {stats.device_idle_us:,.1f} us, of which waiting on the host {stats.host_wait_us:,.1f} us"
            ] + spread_lines(stats)


def _units(stats: Any) -> str:
    """The compute units' utilizations under the profile's names (``Stats.units``), matrix unit first."""
    units = getattr(stats, "units", None) or {"cube": stats.cube_utilization, "vector": stats.vector_utilization}
    return ", ".join(f"{name} {share:.1%}" for name, share in units.items())


def spread_lines(stats: Any) -> list[str]:
    """A multi-device run's lines: communication, then one per card (none for one device)."""
    cards = getattr(stats, "per_device", None)
    if not cards:
        return []
    lines = [f"  {stats.num_devices} cards, parallel {stats.parallel}: communication {stats.comm_us:,.1f} us, "
             f"{stats.comm_bytes:,} bytes, {stats.comm_hidden:.1%} of it hidden behind compute"]
    matrix = next(iter(getattr(stats, "units", None) or {"cube": 0}))
    lines += [f"    device {c['device']}: {c['makespan_us']:,.1f} us, compute {c['compute_us']:,.1f} us, {matrix} "
              f"{c['cube_utilization']:.1%}, activation pool {c['peak_bytes']:,} bytes, weights "
              f"{c['weight_bytes']:,} bytes, comm {c['comm_us']:,.1f} us" for c in cards]
    return lines


def op_type_table(stat_rows: Sequence[dict[str, Any]], limit: int = 5, indent: str = "    ") -> str:
    """The op types that took the most device time, as a small table."""
    head = ["OP Type", "Core Type", "Count", "Total (us)", "Avg (us)", "Share"]
    rows = [[r["OP Type"], r["Core Type"], r["Count"], f"{r['Total Time(us)']:,.1f}", f"{r['Avg Time(us)']:,.2f}",
             f"{r['Ratio(%)']:.1f}%"] for r in stat_rows[:limit]]
    return table(head, rows, indent)


def diagnosis_lines(diagnosis: Any, width: int = 100) -> list[str]:
    """The verdict in plain words, the ops that matter, and the other causes by gain."""
    lines = textwrap.wrap(f"diagnosis: {term(diagnosis.message)}", width, initial_indent="  ", subsequent_indent="    ")
    if diagnosis.ops:   # a node that ran once per micro-batch is named once, with its runs
        runs: dict[tuple[str, str], list[float]] = {}
        for o in diagnosis.ops:
            runs.setdefault((o["name"], o["op"]), []).append(o["us"])
        ops = ", ".join(f"{term(name)} ({term(op)}, {us[0]:,.1f} us" + (f" x{len(us)})" if len(us) > 1 else ")")
                        for (name, op), us in runs.items())
        lines += textwrap.wrap(f"ops that matter: {ops}", width, initial_indent="    ",
                               subsequent_indent="      ")
    others = [f"{c.reason} {c.gain:.2f}x" for c in getattr(diagnosis, "causes", [])[1:]]
    if others:
        lines += textwrap.wrap("other bounds (speedup if the device removed them): " + ", ".join(others), width,
                               initial_indent="    ", subsequent_indent="      ")
    return lines + action_lines(getattr(diagnosis, "actions", []), width)


def action_lines(actions: Sequence[Any], width: int = 100) -> list[str]:
    """The settings that buy the most, each with its measured gain and the flag that applies it."""
    if not actions:
        return ["  actions: none measured buys 5% or more (or it is already in effect)"]
    lines = ["  actions (measured by re-simulation, best first):"]
    for a in actions:
        text = f"{a.name} {a.gain:.2f}x ({a.makespan_us:,.1f} us): {a.flag}, or Session({a.option})"
        lines += textwrap.wrap(text + (f"; {a.caveat}" if a.caveat else ""), width, initial_indent="    ",
                               subsequent_indent="      ")
    return lines


def profile_text(result: Any) -> str:
    """The run summary's profile part: utilization and queues, op types, the diagnosis."""
    from graphexec.profiling.summary import op_rows, op_statistic

    lines = profile_lines(result.stats)
    if result.run is not None:
        records = getattr(result, "records", None) or [result.run]   # several cards: over all of them
        rows = [row for r in records for row in op_rows(r)]
        lines += [f"  device time by op type{' (all cards)' if len(records) > 1 else ''}:",
                  op_type_table(op_statistic(rows))]
        lines += verdict_lines(result.diagnosis) + diagnosis_lines(result.diagnosis)
    return "\n".join(lines)
