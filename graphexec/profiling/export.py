"""Writing a profile folder: timeline.json, op_summary.csv, op_statistic.csv (a multi-card run's hold
every card's rows, beside a one-card profile per card: ``export_cards.py``).

The files are written into a temporary folder beside the target and only then moved in,
each by an atomic rename, so a failure leaves no half-written profile behind.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Protocol

from graphexec._files import folder_mode
from graphexec.errors import GraphExecError, OutputError
from graphexec.profiling.export_cards import cards_of, write_cards
from graphexec.profiling.record import RunRecord
from graphexec.profiling.summary import STATISTIC_COLUMNS, SUMMARY_COLUMNS, op_rows, op_statistic, write_csv
from graphexec.profiling.timeline import timeline


class Profiled(Protocol):
    """What a profile is written from (an engine ``Result`` is one): the run record, its
    trace, and the stats and diagnosis ``graphexec view`` shows."""

    @property
    def run(self) -> RunRecord | None: ...

    @property
    def trace(self) -> dict[str, Any]: ...

    @property
    def stats(self) -> Any: ...

    @property
    def diagnosis(self) -> Any: ...

FILES = ("timeline.json", "op_summary.csv", "op_statistic.csv")


def _write_all(result: Profiled, folder: str) -> list[str]:
    """Every file of the profile into ``folder``; returns their names (a multi-card run's
    tables have every card's rows, and each card has a profile folder: ``export_cards.py``)."""
    record = result.run
    assert record is not None  # write_profile checked it
    doc = timeline(record, result.trace, view_extra(result))
    records = cards_of(result)
    if records:
        names = write_cards(result, folder, records, doc)
    else:
        rows = op_rows(record)
        write_csv(os.path.join(folder, "op_summary.csv"), SUMMARY_COLUMNS, rows)
        write_csv(os.path.join(folder, "op_statistic.csv"), STATISTIC_COLUMNS, op_statistic(rows))
        names = list(FILES[1:])
    with open(os.path.join(folder, "timeline.json"), "w", encoding="utf-8") as f:
        json.dump(doc, f, default=str)
    return ["timeline.json", *names]


def view_extra(result: Profiled) -> dict[str, Any]:
    """What ``graphexec view`` shows beyond the trace: the run's stats and its diagnosis."""
    extra = {"stats": result.stats.to_dict(), "diagnosis": result.diagnosis.to_dict()}
    each = getattr(result, "card_diagnoses", None)   # several cards: each card's own, for its section
    if each:
        extra["card_diagnoses"] = [{k: d.to_dict()[k] for k in ("reason", "message", "ops", "causes")} | {"device": c}
                                   for c, d in zip(sorted(getattr(result, "cards", {})), each)]
    return extra


def write_profile(result: Profiled, folder: str | os.PathLike[str]) -> list[Path]:
    """Write the profile of ``result`` into ``folder`` (created if missing); returns the paths."""
    if result.run is None:
        raise GraphExecError("this result keeps no run record to profile (it was not made by Session.run)")
    target = Path(folder).resolve()
    if target.exists() and not target.is_dir():
        raise GraphExecError(f"{folder}: exists and is not a folder")
    if not target.parent.is_dir():
        raise GraphExecError(f"{folder}: folder {target.parent} does not exist")
    try:
        tmp = tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}-")
    except OSError as e:
        raise OutputError(f"{folder}: cannot write: {e.strerror or e}") from None
    try:
        names = _write_all(result, tmp)
        os.chmod(tmp, folder_mode())  # mkdtemp makes 0700; the profile gets the usual mode
        if not target.exists():
            os.rename(tmp, target)
        else:
            for name in names:
                _replace(os.path.join(tmp, name), target / name)
            for old in target.glob("device_*"):   # a card of an earlier profile here that this run has not
                if old.name not in names and (old / "timeline.json").is_file():
                    shutil.rmtree(old)
    except OSError as e:
        raise OutputError(f"{folder}: cannot write: {e.strerror or e}") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return [target / name for name in names]


def _replace(new: str, old: Path) -> None:
    """``new`` in place of ``old``: a file by an atomic rename; a card's folder (which a
    rename cannot put over a full one) after the old one is removed."""
    if os.path.isdir(new) and old.is_dir():
        shutil.rmtree(old)
    os.replace(new, old)
