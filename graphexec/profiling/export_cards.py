"""A multi-card run's profile: the whole run's tables with each card's rows, and a one-card
profile per card.

The folder's ``op_summary.csv`` holds every card's tasks and ``op_statistic.csv`` each
card's op types, both with msprof's ``Device_id`` column first (as msprof's summaries of
several devices have it); ``timeline.json`` carries each card's memory summary
(``otherData.card_memory``) and each card's activation-pool counter on its own process.
``device_<N>/`` is card N's own profile (timeline.json, op_summary.csv, op_statistic.csv,
with that card's stats and diagnosis), which ``graphexec view`` opens as a one-card report.
"""

from __future__ import annotations

import json
import os
from typing import Any

from graphexec.profiling.memory_view import memory_summary
from graphexec.profiling.summary import STATISTIC_COLUMNS, SUMMARY_COLUMNS, op_rows, op_statistic, write_csv
from graphexec.profiling.timeline import device_pid, pool_counter, timeline
from graphexec.profiling.trace import record_trace

CARD_SUMMARY = ("Device_id", *SUMMARY_COLUMNS)
CARD_STATISTIC = ("Device_id", *STATISTIC_COLUMNS)


def cards_of(result: Any) -> list[Any]:
    """The run record of every card of ``result`` (device id order); one card: []."""
    records = list(getattr(result, "records", None) or [])
    return records if len(records) > 1 else []


def card_folder(device_id: int) -> str:
    return f"device_{device_id}"


def write_cards(result: Any, folder: str, records: list[Any], doc: dict[str, Any]) -> list[str]:
    """Write the whole run's tables and each card's profile into ``folder``; adds each card's
    memory and pool counter to ``doc`` (the whole run's timeline, written after). Returns
    the names written beside the timeline."""
    summary, statistic, memory = [], [], []
    for i, record in enumerate(records):
        rows = op_rows(record)
        summary += [{"Device_id": record.device_id, **r} for r in rows]
        statistic += [{"Device_id": record.device_id, **r} for r in op_statistic(rows)]
        mem = memory_summary(record)
        if mem is not None:
            memory.append({"device": record.device_id, **mem})
        pid = device_pid(doc, record.device_id)
        if i > 0:   # card 0's pool counter is the timeline's own
            doc["traceEvents"] += pool_counter(record, pid)
        _one_card(result, i, record, rows, os.path.join(folder, card_folder(record.device_id)))
    write_csv(os.path.join(folder, "op_summary.csv"), CARD_SUMMARY, summary)
    write_csv(os.path.join(folder, "op_statistic.csv"), CARD_STATISTIC, statistic)
    if memory:
        doc["otherData"]["card_memory"] = memory
    return ["op_summary.csv", "op_statistic.csv"] + [card_folder(r.device_id) for r in records]


def _one_card(result: Any, i: int, record: Any, rows: list[dict[str, Any]], folder: str) -> None:
    """Card ``i``'s profile, as a one-card run's: its trace, stats and diagnosis."""
    os.mkdir(folder)
    stats = result.card_stats[i] if i < len(result.card_stats) else None
    each = result.card_diagnoses
    extra: dict[str, Any] = {"card_of": {"devices": len(result.card_stats), "device": record.device_id}}
    if stats is not None:
        extra["stats"] = stats.to_dict()
    if i < len(each):
        extra["diagnosis"] = each[i].to_dict()
    with open(os.path.join(folder, "timeline.json"), "w", encoding="utf-8") as f:
        json.dump(timeline(record, record_trace(record), extra), f, default=str)
    write_csv(os.path.join(folder, "op_summary.csv"), SUMMARY_COLUMNS, rows)
    write_csv(os.path.join(folder, "op_statistic.csv"), STATISTIC_COLUMNS, op_statistic(rows))
