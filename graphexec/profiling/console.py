"""Terminal output: aligned plain-text tables, the run summary's profile lines, and a
progress bar that draws on stderr only when stderr is a terminal (pipes and CI logs
stay clean)."""

from __future__ import annotations

import re
import sys
import textwrap
import time
from typing import IO, Any, Sequence

BAR = 24


def table(head: Sequence[str], rows: Sequence[Sequence[Any]], indent: str = "") -> str:
    """Columns padded to their widest cell; numbers right-aligned, text left-aligned."""
    cells = [[str(c) for c in row] for row in rows]
    widths = [max(len(x) for x in col) for col in zip(head, *cells)]
    numeric = [all(_is_number(r[i]) for r in cells) and bool(cells) for i in range(len(head))]

    def line(row: Sequence[str]) -> str:
        return indent + "  ".join(c.rjust(w) if num else c.ljust(w)
                                  for c, w, num in zip(row, widths, numeric)).rstrip()

    rule = indent + "  ".join("-" * w for w in widths)
    return "\n".join([line(head), rule] + [line(r) for r in cells])


NUMBER = re.compile(r"-?[\d,]*\.?\d+(%|x)?( [A-Za-z]+)?")   # 1,234.5  12%  1.20x  0.67 MiB


def _is_number(text: str) -> bool:
    return NUMBER.fullmatch(text) is not None


class Progress:
    """``[#######-----] 3/8 streams=4 (2.1 s)`` rewritten in place on stderr.

    Silent unless the stream is a terminal, so redirected output never carries it.
    Use as a context manager; the line is erased when the work is done.
    """

    def __init__(self, total: int, stream: IO[str] | None = None, enabled: bool | None = None) -> None:
        self.total = max(1, total)
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.t0 = time.perf_counter()
        self._width = 0

    def update(self, done: int, what: str = "") -> None:
        """Show ``done`` of ``total`` steps finished, ``what`` being worked on now."""
        if not self.enabled:
            return
        fill = BAR * min(done, self.total) // self.total
        text = f"[{'#' * fill}{'-' * (BAR - fill)}] {done}/{self.total} {what} ({time.perf_counter() - self.t0:.1f} s)"
        self.stream.write("\r" + text.ljust(self._width))
        self.stream.flush()
        self._width = len(text)

    def close(self) -> None:
        if self.enabled and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()
        self._width = 0

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def profile_lines(stats: Any) -> list[str]:
    """The run summary's lines on utilization, queues and idle time."""
    return [f"  utilization: cube {stats.cube_utilization:.1%}, vector {stats.vector_utilization:.1%}, "
            f"HBM bandwidth {stats.hbm_utilization:.1%} of peak",
            f"  command queues: mean depth {stats.mean_queue_depth:.1f}, max {stats.max_queue_depth} tasks; "
            f"device idle {stats.device_idle_us:,.1f} us, of which waiting on the host {stats.host_wait_us:,.1f} us"
            ] + spread_lines(stats)


def spread_lines(stats: Any) -> list[str]:
    """A multi-device run's lines: communication, then one per card (none for one device)."""
    cards = getattr(stats, "per_device", None)
    if not cards:
        return []
    lines = [f"  {stats.num_devices} cards, parallel {stats.parallel}: communication {stats.comm_us:,.1f} us, "
             f"{stats.comm_bytes:,} bytes, {stats.comm_hidden:.1%} of it hidden behind compute"]
    lines += [f"    device {c['device']}: {c['makespan_us']:,.1f} us, compute {c['compute_us']:,.1f} us, cube "
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
    """The verdict in plain words, and the ops that matter."""
    lines = textwrap.wrap(f"diagnosis: {diagnosis.message}", width, initial_indent="  ", subsequent_indent="    ")
    if diagnosis.ops:
        ops = ", ".join(f"{o['name']} ({o['op']}, {o['us']:,.1f} us)" for o in diagnosis.ops)
        lines += textwrap.wrap(f"ops that matter: {ops}", width, initial_indent="    ",
                               subsequent_indent="      ")
    return lines
