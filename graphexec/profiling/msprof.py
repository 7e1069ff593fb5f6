"""msprof's folder layout: ``PROF_<YYYYMMDDhhmmss>_<pid>/`` as the env-var switch writes it.

msprof leaves raw data per device and host and the parsed summaries beside them::

    PROF_20260101120000_4242/
      device_0/data/tasks_0.json        every finished task of each run on device 0
      host/data/launches_0.json         the host's launch calls
      mindstudio_profiler_output/
        msprof_<time>.json              the timeline (Chrome trace; one host and one device
                                        process per run, otherData: each run's stats and diagnosis)
        op_summary_<time>.csv           one row per task, msprof's columns
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
from graphexec.profiling.summary import STATISTIC_COLUMNS, SUMMARY_COLUMNS, op_rows, op_statistic, write_csv
from graphexec.profiling.timeline import timeline
from graphexec.profiling.trace import record_trace

OUTPUT = "mindstudio_profiler_output"
SUMMARY = ("Device_id", "Model Name", "Task ID", *SUMMARY_COLUMNS)
STATISTIC = ("Device_id", "Model Name", *STATISTIC_COLUMNS)
README = """Written by graphexec (ASCEND_PROFILING_ENABLED=1) in msprof's layout. Times are simulated
device microseconds. msprof_*.json opens in Perfetto or chrome://tracing; `graphexec view` on
this folder writes an HTML report. Runs: {runs}.
"""


def folder_name(stamp: str, pid: int) -> str:
    return f"PROF_{stamp}_{pid}"


def _renumber(trace: dict[str, Any], k: int, device_id: int) -> list[dict[str, Any]]:
    """Run ``k``'s events with pids of its own (host 2k, devices 2k+1) and flow ids apart;
    the device process is named by its device id."""
    out = []
    for e in trace["traceEvents"]:
        e = dict(e, pid=2 * k + (e["pid"] != 0))
        if "id" in e:
            e["id"] = (k << 44) + int(e["id"])
        if e.get("ph") == "M" and e.get("name") == "process_name":
            name = str(e["args"]["name"])
            if e["pid"] % 2 and name.startswith("device "):
                name = f"device {device_id} {name.removeprefix('device ')}"
            e["args"] = {"name": f"{name} run {k}"}
        elif e.get("ph") == "M" and e.get("name") == "process_sort_index":
            e["args"] = {"sort_index": e["pid"]}
        out.append(e)
    return out


def merged_timeline(runs: Sequence[Any], extras: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One Chrome trace of every run, each in processes of its own."""
    events: list[dict[str, Any]] = []
    others = []
    for k, (run, extra) in enumerate(zip(runs, extras)):
        doc = timeline(run, record_trace(run), extra)
        events += _renumber(doc, k, run.device_id)
        others.append({**doc["otherData"], "run": k, "device_id": run.device_id})
    first = others[0] if others else {}
    return {"traceEvents": events, "displayTimeUnit": "ns", "otherData": {**first, "runs": others}}


def _fill(folder: Path, runs: Sequence[Any], extras: Sequence[dict[str, Any]], stamp: str) -> None:
    out = folder / OUTPUT
    out.mkdir()
    (folder / "host" / "data").mkdir(parents=True)
    summary, stats = [], []
    for k, run in enumerate(runs):
        raw = folder / f"device_{run.device_id}" / "data"
        raw.mkdir(parents=True, exist_ok=True)
        (raw / f"tasks_{k}.json").write_text(json.dumps(_raw_tasks(run)), encoding="utf-8")
        (folder / "host" / "data" / f"launches_{k}.json").write_text(json.dumps(
            [{"task": lc.task.name, "stream": lc.task.stream.id, "start": lc.start, "end": lc.end}
             for lc in run.launches]), encoding="utf-8")
        rows = op_rows(run)
        head = {"Device_id": run.device_id, "Model Name": run.name}
        summary += [{**head, "Task ID": i, **r} for i, r in enumerate(rows)]
        stats += [{**head, **r} for r in op_statistic(rows)]
    with open(out / f"msprof_{stamp}.json", "w", encoding="utf-8") as f:
        json.dump(merged_timeline(runs, extras), f, default=str)
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
