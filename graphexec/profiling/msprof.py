"""msprof's folder layout: ``PROF_<YYYYMMDDhhmmss>_<pid>/`` as the env-var switch writes it.

msprof leaves raw data per device and host and the parsed summaries beside them::

    PROF_20260101120000_4242/
      device_0/data/tasks_0.json        every finished task of each run on device 0
      host/data/launches_0.json         the host's launch calls
      mindstudio_profiler_output/
        msprof_<time>.json              the timeline (Chrome trace; every run a step on one clock,
                                        one host and one device process per device, otherData:
                                        each run's step, start, stats and diagnosis)
        op_summary_<time>.csv           one row per task, msprof's columns and its Step ID
        op_statistic_<time>.csv         per device, model, OP Type and Core Type
        README.txt

The folder is filled under a temporary name beside it and renamed at the end, so a
reader never sees half of one.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Sequence

from graphexec._files import folder_mode
from graphexec.profiling.steps import place, span_us, starts, step_events, step_ids, window_step_events
from graphexec.profiling.summary import STATISTIC_COLUMNS, SUMMARY_COLUMNS, op_rows, op_statistic, write_csv
from graphexec.profiling.timeline import timeline
from graphexec.profiling.trace import DISTRIBUTED, record_trace

OUTPUT = "mindstudio_profiler_output"
SUMMARY = ("Device_id", "Model Name", "Step ID", "Task ID", *SUMMARY_COLUMNS)
STATISTIC = ("Device_id", "Model Name", *STATISTIC_COLUMNS)
README = """Written by graphexec (ASCEND_PROFILING_ENABLED=1) in msprof's layout. Times are simulated
device microseconds. msprof_*.json opens in Perfetto or chrome://tracing; `graphexec view` on
this folder writes an HTML report. Runs: {runs}.
"""


def folder_name(stamp: str, pid: int) -> str:
    return f"PROF_{stamp}_{pid}"


def merged_timeline(runs: Sequence[Any], extras: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One Chrome trace of every run on one clock, each run a step (``profiling/steps.py``)."""
    docs = [timeline(run, record_trace(run), extra) for run, extra in zip(runs, extras)]
    ids = step_ids(extras)
    spans = [span_us(doc["traceEvents"]) for doc in docs]
    clocks = [getattr(run, "clock", None) for run in runs]
    windows = [extra.get("window") for extra in extras]
    # eager steps: each on its own clock, or laid out by the caller (``begin``: ascend_steps.lay_out)
    fixed = bool(windows) and all(w is not None for w in windows)
    begins = [float(e.get("begin", 0.0)) for e in extras] if fixed else starts(spans, ids, clocks)
    events: list[dict[str, Any]] = []
    named: set[tuple[Any, ...]] = set()
    others = []
    for k, (run, doc) in enumerate(zip(runs, docs)):
        events += place(doc["traceEvents"], k, run.device_id, ids[k], begins[k], named)
        others.append({**doc["otherData"], "run": k, "device_id": run.device_id, "step": ids[k],
                       "start_us": begins[k], "device_pid": 2 * run.device_id + 1})
    if fixed:
        events += window_step_events([r.device_id for r in runs], ids, windows)   # type: ignore[arg-type]
    else:
        events += step_events([r.device_id for r in runs], ids, begins, spans, clocks)
    first = others[0] if others else {}
    return {"traceEvents": events, "displayTimeUnit": "ns", "distributedInfo": DISTRIBUTED,
            "otherData": {**first, "runs": others}}


def _fill(folder: Path, runs: Sequence[Any], extras: Sequence[dict[str, Any]], stamp: str) -> None:
    out = folder / OUTPUT
    out.mkdir()
    (folder / "host" / "data").mkdir(parents=True)
    summary, stats = [], []
    doc = merged_timeline(runs, extras)
    for k, run in enumerate(runs):
        raw = folder / f"device_{run.device_id}" / "data"
        raw.mkdir(parents=True, exist_ok=True)
        (raw / f"tasks_{k}.json").write_text(json.dumps(_raw_tasks(run)), encoding="utf-8")
        (folder / "host" / "data" / f"launches_{k}.json").write_text(json.dumps(
            [{"task": lc.task.name, "stream": lc.task.stream.id, "start": lc.start, "end": lc.end}
             for lc in run.launches]), encoding="utf-8")
        rows = op_rows(run)
        at = doc["otherData"]["runs"][k]
        head = {"Device_id": run.device_id, "Model Name": run.name, "Step ID": at["step"]}
        summary += [{**head, "Task ID": i, **r, "Task Start Time(us)": r["Task Start Time(us)"] + at["start_us"]}
                    for i, r in enumerate(rows)]
        stats += [{"Device_id": run.device_id, "Model Name": run.name, **r} for r in op_statistic(rows)]
    with open(out / f"msprof_{stamp}.json", "w", encoding="utf-8") as f:
        json.dump(doc, f, default=str)
    write_csv(str(out / f"op_summary_{stamp}.csv"), SUMMARY, summary)
    write_csv(str(out / f"op_statistic_{stamp}.csv"), STATISTIC, _merge_statistic(stats))
    (out / "README.txt").write_text(README.format(runs=len(runs)), encoding="utf-8")


def _merge_statistic(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Runs of one model on one device add up, as msprof counts every iteration."""
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["Device_id"], r["Model Name"], r["OP Type"], r["Core Type"]), []).append(r)
    totals: dict[tuple[Any, Any], float] = {}
    out = []
    for (dev, model, op, core), rs in groups.items():
        count = sum(r["Count"] for r in rs)
        total = sum(r["Total Time(us)"] for r in rs)
        totals[(dev, model)] = totals.get((dev, model), 0.0) + total
        out.append({"Device_id": dev, "Model Name": model, "OP Type": op, "Core Type": core, "Count": count,
                    "Total Time(us)": total, "Avg Time(us)": total / count,
                    "Min Time(us)": min(r["Min Time(us)"] for r in rs),
                    "Max Time(us)": max(r["Max Time(us)"] for r in rs)})
    for r in out:
        r["Ratio(%)"] = 100.0 * r["Total Time(us)"] / (totals[(r["Device_id"], r["Model Name"])] or 1.0)
    return sorted(out, key=lambda r: (r["Device_id"], r["Model Name"], -r["Total Time(us)"], r["OP Type"]))


def _raw_tasks(run: Any) -> list[dict[str, Any]]:
    return [{"name": t.name, "kind": t.kind, "stream": t.stream.id, "enqueue": t.enqueue_t, "start": t.start_t,
             "end": t.end_t, "cores": t.max_cores, "block_dim": t.block_dim, "flops": t.flops, "bytes": t.bytes}
            for t in run.tasks if t.end_t is not None]


def write_prof(root: str | os.PathLike[str], runs: Sequence[Any], extras: Sequence[dict[str, Any]],
               stamp: str, pid: int) -> Path:
    """Write ``runs`` (RunRecords or DeviceRuns) as one PROF folder under ``root``; returns it.

    Raises OSError when ``root`` cannot take it (the caller decides how loud to be)."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    name = folder_name(stamp, pid)
    target, n = root / name, 1
    while target.exists():      # a second profile() block in the same second
        n += 1
        target = root / f"{name}_{n}"
    tmp = Path(tempfile.mkdtemp(dir=root, prefix=f".{target.name}-"))
    try:
        _fill(tmp, runs, extras, stamp)
        os.chmod(tmp, folder_mode())
        os.rename(tmp, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target
