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

COLUMNS = ("streams", "policy", "used", "events", "time_us", "speedup", "lower_bound_us", "cube_util",
           "vector_util", "peak_bytes")


@dataclass
class CompareRow:
    streams: int | str
    policy: str
    used: int              # streams the schedule really uses
    events: int            # waits after pruning
    time_us: float
    speedup: float         # over the first row (one stream when asked)
    lower_bound_us: float
    cube_util: float
    vector_util: float
    peak_bytes: int


@dataclass
class Comparison:
    """The rows, whether every row's outputs are bit-identical, and the full results."""

    rows: list[CompareRow]
    identical: bool
    results: list[Result] = field(default_factory=list)
    sessions: list[Session] = field(default_factory=list)
    computed: bool = True   # False: timing-only rows (``compute=False``), no outputs to compare

    @property
    def verdict(self) -> str:
        if not self.computed:
            return "timing only: outputs not computed"
        return "outputs bit-identical across all rows" if self.identical else "OUTPUTS DIFFER between rows"

    def table(self) -> str:
        """A plain-text table a person can read."""
        head = ["streams", "policy", "used", "events", "time (us)", "speedup", "lower bound", "cube util",
                "vector util", "peak memory"]
        body = [[str(r.streams), r.policy, str(r.used), str(r.events), f"{r.time_us:,.1f}", f"{r.speedup:.2f}x",
                 f"{r.lower_bound_us:,.1f}", f"{100 * r.cube_util:.1f}%", f"{100 * r.vector_util:.1f}%",
                 f"{r.peak_bytes / 2**20:,.2f} MiB"] for r in self.rows]
        return "\n".join([table(head, body), self.verdict])

    def to_dict(self) -> dict[str, Any]:
        return {"rows": [r.__dict__ for r in self.rows], "identical": self.identical}


def run_rows(counts: list[Any], label: str, make: Callable[[Any], Session],
             row: Callable[[Any, Session, Any, float], Any], feeds: Mapping[str, Any],
             progress: Callable[[int, int, str], None] | None) -> tuple[list[Any], list[Result], list[Session], bool]:
    """Run one session per count (``make``) on ``feeds``; a row each (``row``, with its
    speedup over the first), and whether every run's outputs are bit-identical."""
    rows: list[Any] = []
    results: list[Result] = []
    sessions: list[Session] = []
    for i, n in enumerate(counts):
        if progress is not None:
            progress(i, len(counts), f"{label}={n}")
        session = make(n)
        result = session.run(feeds)
        s = result.stats
        base = results[0].stats.makespan_us if results else s.makespan_us
        rows.append(row(n, session, s, base / s.makespan_us if s.makespan_us else 1.0))
        results.append(result)
        sessions.append(session)
    if progress is not None:
        progress(len(counts), len(counts), "done")
    identical = all(_same(results[0].outputs, r.outputs) for r in results[1:])
    return rows, results, sessions, identical


def _same(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    return all(np.asarray(a[k]).tobytes() == np.asarray(b[k]).tobytes() for k in a)


def compare(graph: Graph | Any, streams: Iterable[int | str] | int | str | None = None,
            feeds: Mapping[str, Any] | None = None, policy: str | None = None, device: str | None = None,
            launch: str = "graph", progress: Callable[[int, int, str], None] | None = None, threads: int = 1,
            devices: Iterable[int] | None = None, parallel: str = "data", microbatches: int = 1,
            system: str | None = None, compute: bool = True, **compile_options: Any) -> Comparison:
    """Run ``graph`` once per stream count (default 1, 2, 4, 8); speedups are against the
    first row. ``threads``: host threads for the kernels' math (the results do not change).
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

    rows, results, sessions, identical = run_rows(counts, "streams", make, row, feeds, progress)
    return Comparison(rows, identical, results, sessions, compute)
