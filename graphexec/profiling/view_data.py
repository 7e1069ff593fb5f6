"""What ``graphexec view`` reads: a profile on disk, turned back into one run's numbers.

It accepts what graphexec writes: a ``PROF_*`` folder from the environment switch or a
``*_ascend_pt`` folder from the torch-style profiler (or the folder holding them: the
newest is taken), a ``--profile`` folder (``timeline.json`` and ``op_summary.csv``), or a
``timeline.json`` alone. Everything the report needs comes from
the files (the timeline's counters, its ``otherData`` with the stats and the diagnosis,
the op table), so a report can be made where the run is gone.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from graphexec._render import csv_value
from graphexec.errors import GraphExecError
from graphexec.profiling.summary import hcom_type
from graphexec.profiling.timeline import CORES_COUNTER, HBM_COUNTER, QUEUE_COUNTER
from graphexec.profiling.view_schema import checked


@dataclass(frozen=True)
class View:
    """One run of a profile: its trace events, op rows, counters and what otherData carried."""

    source: str
    events: list[dict[str, Any]]
    rows: list[dict[str, Any]]
    other: dict[str, Any]
    runs: list[dict[str, Any]] = field(default_factory=list)   # every run of the profile: its otherData
    counter_pid: int | None = None     # the process whose counters are drawn (None: every one)

    def _counters(self, name: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("ph") == "C" and e.get("name") == name
                and (self.counter_pid is None or e.get("pid") == self.counter_pid)]

    @property
    def stats(self) -> dict[str, Any]:
        return self.other.get("stats") or {}

    @property
    def diagnosis(self) -> dict[str, Any] | None:
        return self.other.get("diagnosis")

    def counter(self, name: str, key: str) -> list[tuple[float, float]]:
        """A counter track's steps (of the run's own device process)."""
        return [(e["ts"], float(e["args"].get(key, 0.0))) for e in self._counters(name)]

    def unit(self, role: str) -> dict[str, str]:
        """The name and label of the unit of ``role`` in the run's profile (a profile
        written before units were named: the role)."""
        units = (self.other.get("peak") or {}).get("units") or {}
        return units.get(role) or {"name": role, "label": f"{role} cores"}

    def cores(self) -> list[tuple[float, float, float]]:
        """(time, busy matrix-unit cores, busy vector-unit cores) steps."""
        matrix, vector = self.unit("cube")["name"], self.unit("vector")["name"]
        return [(e["ts"], float(e["args"].get(matrix, 0)), float(e["args"].get(vector, 0)))
                for e in self._counters(CORES_COUNTER)]

    def queue(self) -> list[tuple[float, float]]:
        return self.counter(QUEUE_COUNTER, "tasks")

    def hbm(self) -> list[tuple[float, float]]:
        return self.counter(HBM_COUNTER, "GB/s")


def _files(path: Path) -> tuple[Path, Path | None]:
    """(timeline, op summary or None) for any of the accepted inputs."""
    if path.is_file():
        return path, None
    if not path.is_dir():
        raise GraphExecError(f"{path}: no such file or folder")
    ascend = path / "ASCEND_PROFILER_OUTPUT" if path.name != "ASCEND_PROFILER_OUTPUT" else path
    if (ascend / "trace_view.json").is_file():   # torch_npu's layout: the op table comes from the trace
        return ascend / "trace_view.json", None
    out = path / "mindstudio_profiler_output"
    if out.is_dir():
        tl = sorted(out.glob("msprof_*.json"))
        ops = sorted(out.glob("op_summary_*.csv"))
        if not tl:
            raise GraphExecError(f"{path}: mindstudio_profiler_output holds no msprof_*.json")
        return tl[-1], ops[-1] if ops else None
    if (path / "timeline.json").is_file():
        ops_file = path / "op_summary.csv"
        return path / "timeline.json", ops_file if ops_file.is_file() else None
    profs = sorted((p for p in [*path.glob("PROF_*"), *path.glob("*_ascend_pt")] if p.is_dir()),
                   key=lambda p: p.stat().st_mtime)
    if profs:
        return _files(profs[-1])
    raise GraphExecError(f"{path}: not a profile (no timeline.json, no mindstudio_profiler_output, no PROF_* or "
                         "*_ascend_pt folder)")


def _load_json(path: Path) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as e:
        raise GraphExecError(f"{path}: cannot read: {e}") from None
    except json.JSONDecodeError as e:
        raise GraphExecError(f"{path}: not JSON: {e.msg} at line {e.lineno}") from None
    except RecursionError:
        raise GraphExecError(f"{path}: not a timeline: its JSON nests deeper than Python's JSON parser goes") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise GraphExecError(f"{path}: not a Chrome trace (no traceEvents list)")
    return checked(doc, path)   # every field the report reads, checked once (view_schema.py)


def profile_files(path: str | Path) -> list[Path]:
    """The files a report of ``path`` reads (its timeline, and its op summary if any)."""
    timeline, ops = _files(Path(path))
    return [timeline] + ([ops] if ops is not None else [])


def _rows(path: Path | None, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The op table: the csv's rows, or the trace's kernels, copies and collectives when there is none."""
    if path is not None:
        try:
            with open(path, newline="", encoding="utf-8") as f:
                return [{k: csv_value(v) if isinstance(v, str) else v for k, v in row.items()}
                        for row in csv.DictReader(f)]
        except (OSError, UnicodeDecodeError, csv.Error) as e:
            raise GraphExecError(f"{path}: not an op summary: {e}") from None
    return [{**({"Device_id": e["args"]["device"]} if "device" in e.get("args", {}) else {}),
             "Op Name": e["name"], "OP Type": _op_type(e), "Stream ID": e["tid"],
             **({"Task Type": "HCCL", "Bound": "communication"} if e["cat"] == "hccl" else {}),
             "Task Start Time(us)": f"{e['ts']:.3f}", "Task Duration(us)": f"{e['dur']:.3f}",
             "Block Dim": e.get("args", {}).get("block_dim", "")}
            for e in events if e.get("ph") == "X" and e.get("cat") in ("kernel", "memcpy", "hccl")]


def _op_type(e: dict[str, Any]) -> str:
    """A trace event's op type: its ``args.op``, a collective's HCOM type, else its category."""
    return hcom_type(e["name"]) if e["cat"] == "hccl" else e.get("args", {}).get("op", e["cat"])


def _pick(doc: dict[str, Any]) -> tuple[int | None, dict[str, Any], set[int]]:
    """The run to show (the last that carries a diagnosis, or the last), its otherData, and
    the pids of its processes: run k's are 2k (host) and 2k+1 (device), with those of the
    runs of the other cards of the same result (one ``group``)."""
    other = doc.get("otherData") or {}
    runs = other.get("runs")
    if not runs:
        return None, other, set()
    k = max((r["run"] for r in runs if r.get("diagnosis")), default=runs[-1]["run"])
    group = {r["run"] for r in runs if r.get("group", r["run"]) == k} | {k}
    return k, next(r for r in runs if r["run"] == k), {p for j in group for p in (2 * j, 2 * j + 1)}


def _steps(doc: dict[str, Any]) -> bool:
    """Whether a PROF timeline lays its runs on one clock as steps (every run is shown)."""
    runs = (doc.get("otherData") or {}).get("runs") or []
    return bool(runs) and all(isinstance(r, dict) and "step" in r for r in runs)


def load(path: str | Path) -> View:
    """A profile ready to draw: a PROF folder's whole timeline (its runs are steps on one
    clock; the stats and diagnosis shown are the diagnosed run's), or the one run a
    single-run profile holds."""
    timeline, ops = _files(Path(path))
    doc = _load_json(timeline)
    k, other, pids = _pick(doc)
    events = doc["traceEvents"]
    runs = list((doc.get("otherData") or {}).get("runs") or [])
    if k is not None and _steps(doc):   # every run a step on one clock: the whole timeline, every row
        return View(str(timeline), events, _rows(ops, events), other, runs, other.get("device_pid"))
    if k is not None:   # an older PROF folder (a clock per run): the shown run's processes only
        events = [e for e in events if e.get("pid") in pids]
    rows = _rows(ops, events)
    if k is not None and rows and "Model Name" in rows[0]:
        rows = _run_rows(rows, doc["otherData"]["runs"], k)
    return View(str(timeline), events, rows, other, runs, other.get("device_pid") if k is None else 2 * k + 1)


def _run_rows(rows: list[dict[str, Any]], runs: list[dict[str, Any]], k: int) -> list[dict[str, Any]]:
    """Run ``k``'s rows of a PROF folder's op summary (its runs follow one another, Task ID from 0)."""
    starts = [i for i, r in enumerate(rows) if r.get("Task ID") == "0"]
    if len(starts) != len(runs):
        return rows
    end = starts[k + 1] if k + 1 < len(starts) else len(rows)
    return rows[starts[k]:end]
