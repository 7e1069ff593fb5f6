"""What a multi-device run returns: stats over the cards, per card, and of communication.

Communication is every task that moves bytes over a link: copies between cards or
between a card and the host (memcpy tasks that carry a ``link``) and collectives
(``hccl``). ``comm_hidden`` is HTA's communication/computation overlap: the time a
communication task runs while a kernel runs on the same card, over all communication
time (a card's kernels are merged into busy intervals first, so two kernels at once
count once).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Sequence

from graphexec.cluster.cards import WORK
from graphexec.engine.metrics import utilization
from graphexec.engine.result import Result, Stats, make_stats, unit_shares

if TYPE_CHECKING:
    from graphexec.engine.compiled import Compiled
    from graphexec.profiling.diagnosis import Diagnosis
    from graphexec.runtime.device import Device


@dataclass(frozen=True)
class MultiStats(Stats):
    """:class:`Stats` over every card of a server, plus what only many cards have.

    ``makespan_us`` spans the first task's start to the last task's end on any card;
    utilizations are shares of the whole server's peak over that span; counts (tasks,
    kernels, events) are summed over the cards; ``num_streams``, bounds and byte figures
    (``peak_bytes``, ``weight_bytes``, ...) are the largest card's, since each card has
    its own schedule, memory plan and HBM. ``per_device`` has one dict per card (device id order):
    ``device``, ``makespan_us``, ``compute_us`` (time with a kernel running), the three
    utilizations over the card's own makespan, ``peak_bytes``, ``weight_bytes``,
    ``io_bytes``, ``num_tasks``, ``comm_bytes``, ``comm_us``, ``comm_hidden``.
    A mode may add its own numbers under ``extra`` (a pipeline's bubble fraction).
    """

    num_devices: int = 1
    parallel: str = "data"
    microbatches: int = 1
    per_device: list[dict[str, Any]] = field(default_factory=list)
    comm_bytes: int = 0
    comm_us: float = 0.0
    comm_hidden: float = 0.0


@dataclass
class MultiResult(Result):
    """A multi-device run's outputs and stats; ``trace`` has one process per card (pid =
    device id, see ``profiling/trace.server_trace``); ``run`` is card 0's record and
    ``records`` every card's (device id order, a card's first plan). ``diagnosis`` is the
    whole run's: the critical card's (the one whose last task ends last, which bounds the
    makespan), with every card's verdict under ``analyses["cards"]``
    (``profiling/cards_diagnosis.py``)."""

    cards: dict[int, Any] = field(default_factory=dict, repr=False, compare=False)
    card_stats: list[Stats] = field(default_factory=list, repr=False, compare=False)
    records: list[Any] = field(default_factory=list, repr=False, compare=False)
    _card_diagnoses: list["Diagnosis"] | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def trace(self) -> dict[str, Any]:
        if self._trace is None:
            from graphexec.profiling.trace import server_trace

            name = self.run.name if self.run is not None else "graphexec"
            self._trace = server_trace(self.cards, name)
        return self._trace

    @property
    def card_diagnoses(self) -> list["Diagnosis"]:
        """Each card's diagnosis, made as a one-card run's is (cached)."""
        if self._card_diagnoses is None:
            from graphexec.profiling.diagnosis import diagnose

            records = self.records or ([self.run] if self.run is not None else [])
            self._card_diagnoses = [diagnose(r, s) for r, s in zip(records, self.card_stats)]
        return self._card_diagnoses

    @property
    def diagnosis(self) -> "Diagnosis":
        if self._diagnosis is None:
            from graphexec.profiling.cards_diagnosis import whole_run

            self._diagnosis = whole_run(self.records or [self.run], self.card_diagnoses)
        return self._diagnosis


def is_comm(t: Any) -> bool:
    """Whether a finished task moved bytes over a link (host link, peer link, collective)."""
    return t.kind == "hccl" or (t.kind == "memcpy" and t.meta.get("link") is not None)


def _merged(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for a, b in sorted(intervals):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _overlap(a: float, b: float, busy: list[tuple[float, float]]) -> float:
    return sum(max(0.0, min(b, y) - max(a, x)) for x, y in busy)


def _span(t: Any) -> tuple[float, float]:
    return float(t.start_t), float(t.end_t)


def card_numbers(plan: "Compiled", dev: "Device") -> tuple[Stats, dict[str, Any], tuple[int, float, float]]:
    """One card's Stats, its ``per_device`` entry and its (comm bytes, comm us, hidden us)."""
    st = make_stats(plan, dev)
    done = [t for t in dev.sim.finished if t.start_t is not None and t.end_t is not None]
    busy = _merged([_span(t) for t in done if t.kind == "kernel"])
    comm = [_span(t) for t in done if is_comm(t)]
    nbytes = int(sum(t.bytes for t in done if is_comm(t)))
    comm_us = sum(b - a for a, b in comm)
    hidden = sum(_overlap(a, b, busy) for a, b in comm)
    entry = {"device": dev.id, "makespan_us": st.makespan_us, "compute_us": sum(b - a for a, b in busy),
             "cube_utilization": st.cube_utilization, "vector_utilization": st.vector_utilization,
             "hbm_utilization": st.hbm_utilization, "peak_bytes": st.peak_bytes, "weight_bytes": st.weight_bytes,
             "io_bytes": st.io_bytes, "num_tasks": st.num_tasks, "comm_bytes": nbytes, "comm_us": comm_us,
             "comm_hidden": hidden / comm_us if comm_us else 0.0}
    return st, entry, (nbytes, comm_us, hidden)


_SUMMED = ("num_tasks", "num_kernels", "num_aicpu", "num_events", "waits_before_pruning", "num_event_ids")
_MEAN = ("mean_queue_depth", "device_idle_us", "host_wait_us")


def multi_stats(cards: Sequence[tuple["Compiled", "Device"]], parallel: str, microbatches: int,
                compile_s: float) -> tuple[MultiStats, list[Stats]]:
    """The run's MultiStats and each card's own Stats (cards in device id order; a card
    that ran several plans lists its first, and its tasks count once)."""
    numbers = [card_numbers(plan, dev) for plan, dev in cards]
    each = [n[0] for n in numbers]
    done = [t for _, dev in cards for t in dev.sim.finished if t.start_t is not None and t.kind in WORK]
    spans = [_span(t) for t in done]
    makespan = (max(b for _, b in spans) - min(a for a, _ in spans)) if spans else 0.0
    profile = cards[0][0].profile
    util = utilization(done, profile, makespan)
    agg: dict[str, Any] = {}
    for f in fields(Stats):
        values = [getattr(s, f.name) for s in each]
        if f.name in _SUMMED:
            agg[f.name] = sum(values)
        elif f.name in _MEAN:
            agg[f.name] = sum(values) / len(values)
        elif f.name == "extra":
            agg[f.name] = {}
        elif all(isinstance(v, (int, float)) for v in values):
            agg[f.name] = max(values)
        else:
            agg[f.name] = values[0]
    n = len(cards)
    agg.update(makespan_us=float(makespan), compile_s=compile_s, cube_utilization=util["cube_utilization"] / n,
               vector_utilization=util["vector_utilization"] / n, hbm_utilization=util["hbm_utilization"] / n)
    agg["units"] = unit_shares(profile, agg["cube_utilization"], agg["vector_utilization"])
    nbytes = sum(n[2][0] for n in numbers)
    comm_us = sum(n[2][1] for n in numbers)
    hidden = sum(n[2][2] for n in numbers)
    stats = MultiStats(**agg, num_devices=n, parallel=parallel, microbatches=microbatches,
                       per_device=[n[1] for n in numbers], comm_bytes=nbytes, comm_us=comm_us,
                       comm_hidden=hidden / comm_us if comm_us else 0.0)
    return stats, each
