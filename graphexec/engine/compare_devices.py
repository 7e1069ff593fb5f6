"""Side-by-side runs of one graph on 1, 2, 4, ... cards (``gx.compare(devices=...)``).

The one-card row is a plain single-device session (today's behaviour) of the graph as
the multi-device rows see it: freed of a declared fixed batch (``passes/free_batch.py``)
when the feeds' batch differs from it. Speedups are against the first row. A
multi-device row's time includes its host-to-device and device-to-host copies (tasks on
each card's copy stream); the one-card row copies on the host before and after its run,
outside its makespan.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

from graphexec.engine.compare import Comparison, run_rows
from graphexec.engine.feeds import check_feeds
from graphexec.engine.session import Session
from graphexec.errors import FeedError
from graphexec.ir import Graph
from graphexec.passes.free_batch import free_batch
from graphexec.profiling.console import table
from graphexec.runtime.systems import load_system


@dataclass
class DeviceRow:
    devices: int
    parallel: str          # the mode that ran ("auto" shows its choice)
    time_us: float
    speedup: float         # over the first row
    comm_us: float
    comm_hidden: float
    cube_util: float
    vector_util: float
    peak_bytes: int        # activation pool of the largest card
    weight_bytes: int      # weights on the largest card


@dataclass
class DeviceComparison(Comparison):
    rows: list[DeviceRow]   # type: ignore[assignment]

    def table(self) -> str:
        head = ["devices", "parallel", "time (us)", "speedup", "comm (us)", "comm hidden", "cube util", "vector util",
                "peak memory/card", "weights/card"]
        body = [[str(r.devices), r.parallel, f"{r.time_us:,.1f}", f"{r.speedup:.2f}x", f"{r.comm_us:,.1f}",
                 f"{100 * r.comm_hidden:.1f}%", f"{100 * r.cube_util:.1f}%", f"{100 * r.vector_util:.1f}%",
                 f"{r.peak_bytes / 2**20:,.2f} MiB", f"{r.weight_bytes / 2**20:,.2f} MiB"] for r in self.rows]
        return "\n".join([table(head, body), self.verdict])


def _one_card_graph(graph: Graph, feeds: Mapping[str, Any]) -> Graph:
    try:
        check_feeds(graph, feeds)
        return graph
    except FeedError:
        freed = free_batch(graph)
        if freed is graph:
            raise
        return freed


def compare_devices(graph: Graph, devices: Iterable[int], feeds: Mapping[str, Any], parallel: str = "data",
                    streams: int | str = 1, microbatches: int = 1, system: str | None = None,
                    device: str | None = None, launch: str = "graph", threads: int = 1,
                    progress: Callable[[int, int, str], None] | None = None, compute: bool = True) -> DeviceComparison:
    """One row per card count in ``devices``, each a session over that many cards."""
    counts = list(devices)
    one = device if device is not None or system is None else load_system(system).device_profile

    def make(n: int) -> Session:
        if n == 1:
            return Session(_one_card_graph(graph, feeds), streams=streams, device=one, launch=launch,
                           threads=threads, compute=compute)
        return Session(graph, streams=streams, device=device, launch=launch, threads=threads, devices=n,
                       parallel=parallel, microbatches=microbatches, system=system, compute=compute)

    def row(n: int, session: Session, s: Any, speedup: float) -> DeviceRow:
        return DeviceRow(n, getattr(s, "parallel", "-"), s.makespan_us, speedup, getattr(s, "comm_us", 0.0),
                         getattr(s, "comm_hidden", 0.0), s.cube_utilization, s.vector_utilization,
                         s.peak_bytes, s.weight_bytes)

    rows, results, sessions, identical = run_rows(counts, "devices", make, row, feeds, progress)
    return DeviceComparison(rows, identical, results, sessions, compute)
