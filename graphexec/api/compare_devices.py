"""Side-by-side runs of one graph on 1, 2, 4, ... cards (``gx.compare(devices=...)``).

The one-card row runs the graph on one card of the system through the same launches as
the multi-card rows (``parallel.one_card``): every row's time includes its host-to-device
and device-to-host copies (tasks on each card's copy stream), so the speedups (against
one card of the same system at one stream, run silently when the counts lack it)
compare like with like. A declared fixed batch is freed when the feeds'
batch differs from it (``passes/free_batch.py``), as on many cards.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

import numpy as np

from graphexec.api.compare import Comparison, run_rows
from graphexec.api.session import Session
from graphexec.cluster import one_card
from graphexec.ir import Graph
from graphexec.profiling.cards_summary import tensor_line
from graphexec.profiling.console import table
from graphexec.runtime.systems import load_system


@dataclass
class DeviceRow:
    devices: int
    parallel: str          # the mode that ran ("auto" shows its choice)
    makespan_us: float
    speedup: float         # over one card of the same system, one stream
    comm_us: float
    comm_hidden: float
    cube_utilization: float
    vector_utilization: float
    peak_bytes: int        # activation pool of the largest card
    weight_bytes: int      # weights on the largest card


@dataclass
class DeviceComparison(Comparison):
    rows: list[DeviceRow]   # type: ignore[assignment]

    @property
    def verdict(self) -> str:
        if not self.computed or self.identical or not any(r.parallel == "tensor" for r in self.rows) \
                or (len(self.rows) < 2 and self.baseline_row):   # one row that is the baseline: no verdict
            return super().verdict
        first = self.baseline_outputs
        close = all(np.allclose(r.outputs[k], v, rtol=1e-4, atol=1e-5) for r in self.results for k, v in first.items())
        where = "across all rows" if self.baseline_row else f"to the {self.baseline} baseline"
        return (f"outputs allclose {where} (tensor parallelism sums in another order)" if close
                else "OUTPUTS DIFFER between rows")

    def table(self) -> str:
        head = ["devices", "parallel", "time (us)", "speedup", "comm (us)", "comm hidden", *self.unit_heads(),
                "peak memory/card", "weights/card"]
        body = [[str(r.devices), r.parallel, f"{r.makespan_us:,.1f}", f"{r.speedup:.2f}x", f"{r.comm_us:,.1f}",
                 f"{100 * r.comm_hidden:.1f}%", f"{100 * r.cube_utilization:.1f}%",
                 f"{100 * r.vector_utilization:.1f}%",
                 f"{r.peak_bytes / 2**20:,.2f} MiB", f"{r.weight_bytes / 2**20:,.2f} MiB"] for r in self.rows]
        why = [f"{r.devices} cards: {tensor_line(res.stats.extra['tensor_splits'])}"
               for r, res in zip(self.rows, self.results) if "tensor_splits" in res.stats.extra]
        return "\n".join([table(head, body), *why, self.speedup_note(), self.verdict])


def compare_devices(graph: Graph, devices: Iterable[int], feeds: Mapping[str, Any], parallel: str = "data",
                    streams: int | str = 1, microbatches: int = 1, system: str | None = None,
                    device: str | None = None, launch: str = "graph", threads: int = 1,
                    progress: Callable[[int, int, str], None] | None = None, compute: bool = True) -> DeviceComparison:
    """One row per card count in ``devices``, each a session over that many cards."""
    counts = list(devices)
    one = device if device is not None or system is None else load_system(system).device_profile

    def make(n: int, per_card: int | str = streams) -> Session:
        if n == 1:
            session = Session(graph, streams=per_card, device=one, launch=launch, threads=threads, compute=compute)
            session.multi = one_card(session.graph, session.options, session.profile, system, one is not None)
            return session
        return Session(graph, streams=streams, device=device, launch=launch, threads=threads, devices=n,
                       parallel=parallel, microbatches=microbatches, system=system, compute=compute)

    def row(n: int, session: Session, s: Any, speedup: float) -> DeviceRow:
        return DeviceRow(n, getattr(s, "parallel", "-"), s.makespan_us, speedup, getattr(s, "comm_us", 0.0),
                         getattr(s, "comm_hidden", 0.0), s.cube_utilization, s.vector_utilization,
                         s.peak_bytes, s.weight_bytes)

    # the baseline is one card at one stream: a row when the counts hold 1 at one stream per card
    base = 1 if streams == 1 else 0
    out = run_rows(counts, "devices", make, row, feeds, progress, base, lambda: make(1, 1))
    return DeviceComparison(out.rows, out.identical, out.results, out.sessions, compute, "1 card, 1 stream",
                            out.baseline_us, out.baseline_row, out.baseline_outputs)
