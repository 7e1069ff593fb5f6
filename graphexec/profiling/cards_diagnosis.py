"""A multi-card run's diagnosis: every card is diagnosed as a one-card run is (its own
record and plan, ``diagnosis.diagnose``), and the whole run's is the critical card's, the
card whose last task ends last and so bounds the makespan, with each card's one-line
verdict under ``analyses["cards"]`` (``analyses["critical_card"]`` names the critical one)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any, Sequence

from graphexec._render import term

if TYPE_CHECKING:
    from graphexec.profiling.diagnosis import Diagnosis


def _end(record: Any) -> float:
    return max((float(t.end_t) for t in record.tasks if t.end_t is not None), default=0.0)


def critical_card(records: Sequence[Any]) -> int:
    """The index of the card whose last task ends last (the lowest index on a tie)."""
    ends = [_end(r) for r in records]
    return ends.index(max(ends))


def _start(records: Sequence[Any]) -> float:
    return min((float(t.start_t) for r in records for t in r.tasks if t.start_t is not None), default=0.0)


def verdict(record: Any, d: "Diagnosis", t0: float = 0.0) -> dict[str, Any]:
    """A card's verdict: its first cause, that cause's measured gain, the first sentence, and
    when its last task ends (us from ``t0``, the run's first task's start)."""
    gain = d.causes[0].gain if d.causes else 1.0
    return {"device": int(record.device_id), "reason": d.reason, "gain": float(gain),
            "end_us": _end(record) - t0, "message": d.message.split(". ")[0].rstrip(".") + "."}


def whole_run(records: Sequence[Any], each: Sequence["Diagnosis"]) -> "Diagnosis":
    """The critical card's diagnosis with every card's verdict beside it."""
    k = critical_card(records)
    t0 = _start(records)
    cards = [verdict(r, d, t0) for r, d in zip(records, each)]
    return replace(each[k], analyses={**each[k].analyses, "critical_card": cards[k]["device"], "cards": cards})


def verdict_lines(diagnosis: Any) -> list[str]:
    """The summary's lines on which card the diagnosis is and each card's verdict."""
    cards = diagnosis.analyses.get("cards") if isinstance(diagnosis.analyses, dict) else None
    if not cards:
        return []
    crit = diagnosis.analyses["critical_card"]
    lines = [f"  diagnosis below: card {crit}'s run, the card that bounds the makespan (its last task ends last); "
             f"each card's verdict:"]
    lines += [f"    card {c['device']}{' (critical)' if c['device'] == crit else ''}: {term(c['reason'])} "
              f"{c['gain']:.2f}x, its last task ends at {c['end_us']:,.1f} us: {term(c['message'])}" for c in cards]
    return lines
