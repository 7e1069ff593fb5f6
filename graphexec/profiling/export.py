"""Writing a profile folder: timeline.json, op_summary.csv, op_statistic.csv.

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


def _write_all(result: Profiled, folder: str) -> None:
    record = result.run
    assert record is not None  # write_profile checked it
    rows = op_rows(record)
    with open(os.path.join(folder, "timeline.json"), "w", encoding="utf-8") as f:
        json.dump(timeline(record, result.trace, view_extra(result)), f, default=str)
    write_csv(os.path.join(folder, "op_summary.csv"), SUMMARY_COLUMNS, rows)
    write_csv(os.path.join(folder, "op_statistic.csv"), STATISTIC_COLUMNS, op_statistic(rows))


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
        _write_all(result, tmp)
        os.chmod(tmp, folder_mode())  # mkdtemp makes 0700; the profile gets the usual mode
        if not target.exists():
            os.rename(tmp, target)
        else:
            for name in FILES:
                os.replace(os.path.join(tmp, name), target / name)
    except OSError as e:
        raise OutputError(f"{folder}: cannot write: {e.strerror or e}") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return [target / name for name in FILES]
