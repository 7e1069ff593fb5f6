"""Side-by-side runs of one graph under several stream counts and policies."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

import numpy as np

from graphexec.api.session import Session
from graphexec.engine.feeds import default_feeds
from graphexec.engine.result import Result
from graphexec.errors import GraphExecError
from graphexec.frontend import load
from graphexec.ir import Graph
from graphexec.profiling.console import table

COLUMNS = ("streams", "policy", "used", "events", "makespan_us", "speedup", "lower_bound_us", "cube_utilization",
           "vector_utilization", "peak_bytes")


@dataclass
class CompareRow:
    streams: int | str
    policy: str
    used: int              # streams the schedule really uses
    events: int            # waits after pruning
    makespan_us: float
    speedup: float         # over the baseline: one stream on the same device (``Comparison.baseline``)
    lower_bound_us: float
    cube_utilization: float
    vector_utilization: float
    peak_bytes: int


@dataclass
class Comparison:
    """The rows, whether every row's outputs (and the baseline's) are bit-identical, and the
    full results. Every speedup is over ``baseline`` (one stream on the same device; with
    card counts, one card of the same system at one stream), which ran as a row when the
    rows hold it and silently otherwise (``baseline_us`` is its time either way)."""

    rows: list[CompareRow]
    identical: bool
    results: list[Result] = field(default_factory=list)
    sessions: list[Session] = field(default_factory=list)
    computed: bool = True   # False: timing-only rows (``compute=False``), no outputs to compare
    baseline: str = "1 stream"
    baseline_us: float = 0.0
    baseline_row: bool = True   # False: the baseline ran silently, it is not a row
    baseline_outputs: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def verdict(self) -> str:
        """What the outputs say; none when there is nothing to compare (one row that is the baseline)."""
        if not self.computed:
            return "timing only: outputs not computed"
        if len(self.rows) < 2 and self.baseline_row:
            return "one row: no outputs to compare"
        if len(self.rows) < 2:
            return (f"outputs bit-identical to the {self.baseline} baseline" if self.identical
                    else f"OUTPUTS DIFFER from the {self.baseline} baseline")
        tail = "" if self.baseline_row else f" and the {self.baseline} baseline"
        return f"outputs bit-identical across all rows{tail}" if self.identical else "OUTPUTS DIFFER between rows"

    def speedup_note(self) -> str:
        """One line naming the baseline every speedup is over, and where it came from."""
        where = "a row of the table" if self.baseline_row else "run for the speedups, not a row"
        return f"speedup: over {self.baseline} ({self.baseline_us:,.1f} us; {where})"

    def table(self) -> str:
        """A plain-text table a person can read."""
        head = ["streams", "policy", "used", "events", "time (us)", "speedup", "lower bound", *self.unit_heads(),
                "peak memory"]
        body = [[str(r.streams), r.policy, str(r.used), str(r.events), f"{r.makespan_us:,.1f}", f"{r.speedup:.2f}x",
                 f"{r.lower_bound_us:,.1f}", f"{100 * r.cube_utilization:.1f}%", f"{100 * r.vector_utilization:.1f}%",
                 f"{r.peak_bytes / 2**20:,.2f} MiB"] for r in self.rows]
        return "\n".join([table(head, body), self.speedup_note(), self.verdict])

    def unit_heads(self) -> list[str]:
        """The cube_utilization and vector_utilization columns' heads, with the profile's names of the units."""
        units = self.results[0].stats.units if self.results else {}
        names = list(units) if len(units) == 2 else ["cube", "vector"]
        return [f"{name} util" for name in names]

    def to_dict(self) -> dict[str, Any]:
        return {"rows": [r.__dict__ for r in self.rows], "identical": self.identical,
                "baseline": {"label": self.baseline, "makespan_us": self.baseline_us, "row": self.baseline_row}}


@dataclass
class Rows:
    """What :func:`run_rows` gives: the rows, their runs, the baseline's time and whether it is a row."""

    rows: list[Any]
    results: list[Result]
    sessions: list[Session]
    identical: bool
    baseline_us: float
    baseline_row: bool
    baseline_outputs: dict[str, Any]


def run_rows(counts: list[Any], label: str, make: Callable[[Any], Session],
             row: Callable[[Any, Session, Any, float], Any], feeds: Mapping[str, Any],
             progress: Callable[[int, int, str], None] | None, base: Any,
             make_base: Callable[[], Session] | None = None) -> Rows:
    """Run one session per count (``make``) on ``feeds``; a row each (``row``, with its
    speedup over the baseline), and whether every run's outputs are bit-identical. The
    baseline is the row of count ``base``, or when the counts lack it a silent run of
    ``make_base()`` (default ``make(base)``) first, whose outputs are compared too."""
    silent = base not in counts
    todo = ([base] if silent else []) + list(counts)
    runs: list[tuple[Session, Result]] = []
    for i, n in enumerate(todo):
        if progress is not None:
            progress(i, len(todo), f"{label}={n}" + (" (baseline)" if silent and i == 0 else ""))
        session = make_base() if silent and i == 0 and make_base is not None else make(n)
        runs.append((session, session.run(feeds)))
    if progress is not None:
        progress(len(todo), len(todo), "done")
    base_us = runs[0 if silent else todo.index(base)][1].stats.makespan_us
    shown = runs[1:] if silent else runs
    rows = [row(n, session, r.stats, base_us / r.stats.makespan_us if r.stats.makespan_us else 1.0)
            for n, (session, r) in zip(counts, shown)]
    identical = all(_same(runs[0][1].outputs, r.outputs) for _, r in runs[1:])
    return Rows(rows, [r for _, r in shown], [s for s, _ in shown], identical, base_us, not silent,
                runs[0 if silent else todo.index(base)][1].outputs)


def _same(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    return all(np.asarray(a[k]).tobytes() == np.asarray(b[k]).tobytes() for k in a)


def compare(graph: Graph | Any, streams: Iterable[int | str] | int | str | None = None,
            feeds: Mapping[str, Any] | None = None, policy: str | None = None, device: str | None = None,
            launch: str = "graph", progress: Callable[[int, int, str], None] | None = None, threads: int = 1,
            devices: Iterable[int] | None = None, parallel: str = "data", microbatches: int = 1,
            system: str | None = None, compute: bool = True, **compile_options: Any) -> Comparison:
    """Run ``graph`` once per stream count (default 1, 2, 4, 8); speedups are over one
    stream on the same device (run silently, not as a row, when ``streams`` lacks 1).
    ``threads``: host threads for the kernels' math (the results do not change).
    With ``devices`` (card counts, e.g. [1, 2, 4]): one row per count, spread by
    ``parallel`` with ``streams`` (an int, default 1) per card (``api/compare_devices.py``).
    ``compute=False``: timing-only rows (``Session.simulate``), the same numbers, no outputs.
    ``compile_options``: Session's fusion and precision keywords, the same for every row.

    Example:
        >>> cmp = gx.compare(gx.load("models/inception_block.onnx"), streams=[1, 4])
        >>> print(cmp.table())
    """
    graph = graph if isinstance(graph, Graph) else load(graph)
    feeds = dict(feeds) if feeds is not None else default_feeds(graph)
    if devices is not None:
        from graphexec.api.compare_devices import compare_devices

        if compile_options:
            raise GraphExecError(f"with devices, compare takes none of {', '.join(sorted(compile_options))}")
        if streams is not None and not isinstance(streams, (int, str)):
            raise GraphExecError("with devices, streams is the stream count per card (an int or 'auto')")
        return compare_devices(graph, devices, feeds, parallel, 1 if streams is None else streams, microbatches,
                               system, device, launch, threads, progress, compute)
    streams = (1, 2, 4, 8) if streams is None else [streams] if isinstance(streams, (int, str)) else streams
    counts = list(streams)

    def make(n: int | str) -> Session:
        return Session(graph, streams=n, device=device, policy=None if n == 1 and policy != "auto" else policy,
                       launch=launch, threads=threads, compute=compute, **compile_options)

    def row(n: int | str, session: Session, s: Any, speedup: float) -> CompareRow:
        return CompareRow(n, session.compiled.schedule.policy, s.num_streams, s.num_events, s.makespan_us,
                          speedup, s.lower_bound_us, s.cube_utilization, s.vector_utilization, s.peak_bytes)

    def make_base() -> Session:
        return Session(graph, streams=1, device=device, launch=launch, threads=threads, compute=compute,
                       **compile_options)

    out = run_rows(counts, "streams", make, row, feeds, progress, 1, make_base)
    return Comparison(out.rows, out.identical, out.results, out.sessions, compute, "1 stream", out.baseline_us,
                      out.baseline_row, out.baseline_outputs)
