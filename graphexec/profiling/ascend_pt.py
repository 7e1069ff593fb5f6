"""torch_npu's profiler layout: ``<worker>_<timestamp>_ascend_pt/ASCEND_PROFILER_OUTPUT/``.

What ``torch_npu.profiler.tensorboard_trace_handler(dir)`` leaves, with the columns of the
Ascend PyTorch Profiler user guide (Ascend/pytorch, "output result file description")::

    <worker>_<YYYYmmddHHMMSSmmm>_ascend_pt/
      profiler_info.json              the profiler's settings
      ASCEND_PROFILER_OUTPUT/
        trace_view.json               the timeline (graphexec's, schemas/timeline.md: every step a
                                      ProfilerStep#N, otherData with each step's stats and diagnosis)
        kernel_details.csv            one row per device task, with its Step Id
        operator_details.csv          one row per op call: host (launch) and device time
        op_statistic.csv              per OP Type and Core Type
        step_trace_time.csv           per step: computing, communication, overlap, free
        api_statistic.csv             the host's runtime calls by API (ascend_extra.py)
        memory_record.csv             allocated / reserved / active over time (profile_memory)
        operator_memory.csv           each block an op held, with the totals then (profile_memory)
        communication.json            each rank's part of each collective: wait, transit, bandwidth
        communication_matrix.json     ... and its bytes per src-dst link (both: when collectives ran)

A step's window is the host's time from one ``prof.step()`` to the next. What graphexec has
no counterpart for is written as torch_npu writes a missing value, ``N/A`` (Model ID, OP
State, Mix Block Num); formats are ``ND`` (eager tensors are plain row-major); ``Call
Stack`` holds the launching Python frames with ``with_stack`` (empty without). Copies count as neither computing nor
communication in ``step_trace_time.csv``: their time is in Free.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Sequence

from graphexec._files import folder_mode
from graphexec.profiling.ascend_comm import communication
from graphexec.profiling.ascend_extra import API_COLUMNS, OPERATOR_MEMORY_COLUMNS, api_rows, operator_memory_rows
from graphexec.profiling.msprof import merged_timeline
from graphexec.profiling.summary import STATISTIC_COLUMNS, op_rows, op_statistic, write_csv

OUTPUT = "ASCEND_PROFILER_OUTPUT"
KERNEL_COLUMNS = ("Step Id", "Device_id", "Model ID", "Task ID", "Stream ID", "Name", "Type", "OP State",
                  "Accelerator Core", "Start Time(us)", "Duration(us)", "Wait Time(us)", "Block Num", "Mix Block Num",
                  "HF32 Eligible", "Input Shapes", "Input Data Types", "Input Formats", "Output Shapes",
                  "Output Data Types", "Output Formats")
OPERATOR_COLUMNS = ("Name", "Input Shapes", "Call Stack", "Host Self Duration(us)", "Host Total Duration(us)",
                    "Device Self Duration(us)", "Device Total Duration(us)", "Device Self Duration With AICore(us)",
                    "Device Total Duration With AICore(us)")
STEP_COLUMNS = ("Device_id", "Step", "Computing", "Communication(Not Overlapped)", "Overlapped", "Communication",
                "Free", "Stage", "Bubble", "Communication(Not Overlapped and Exclude Receive)", "Preparing")
MEMORY_COLUMNS = ("Component", "Timestamp(us)", "Total Allocated(MB)", "Total Reserved(MB)", "Total Active(MB)",
                  "Stream Ptr", "Device Type")
MB = 1024.0 * 1024.0
NA = "N/A"
Memory = tuple[Sequence[Any], Sequence[Any]]   # (allocator samples, blocks)


def _formats(cell: str) -> str:
    return ";".join("ND" for _ in cell.split(";")) if cell else ""


def kernel_rows(runs: Sequence[Any], steps: Sequence[int], begins: Sequence[float] | None = None
                ) -> list[dict[str, Any]]:
    """kernel_details.csv: every kernel and copy of every step, in start order per step, at
    its time on trace_view.json's clock (``begins``: each run's shift onto it)."""
    out = []
    for run, step, begin in zip(runs, steps, begins or [0.0] * len(runs)):
        for i, r in enumerate(op_rows(run)):
            out.append({"Step Id": step, "Device_id": run.device_id, "Model ID": NA, "Task ID": i,
                        "Stream ID": r["Stream ID"], "Name": r["Op Name"], "Type": r["OP Type"], "OP State": NA,
                        "Accelerator Core": r["Task Type"], "Start Time(us)": r["Task Start Time(us)"] + begin,
                        "Duration(us)": r["Task Duration(us)"], "Wait Time(us)": r["Task Wait Time(us)"],
                        "Block Num": r["Block Dim"], "Mix Block Num": NA, "HF32 Eligible": "NO",
                        "Input Shapes": r["Input Shapes"], "Input Data Types": r["Input Data Types"],
                        "Input Formats": _formats(r["Input Shapes"]), "Output Shapes": r["Output Shapes"],
                        "Output Data Types": r["Output Data Types"], "Output Formats": _formats(r["Output Shapes"])})
    return out


def operator_rows(runs: Sequence[Any], record_shapes: bool,
                  stacks: dict[int, str] | None = None) -> list[dict[str, Any]]:
    """operator_details.csv: one row per launched op (an eager op is one task): its host
    launch time and its device time (on the AI cores when it ran there)."""
    out = []
    for run in runs:
        host = {id(lc.task): lc.end - lc.start for lc in run.launches}
        for t in sorted((t for t in run.tasks if t.kind in ("kernel", "memcpy") and t.end_t is not None),
                        key=lambda t: t.seq):
            info = t.meta.get("task")
            dev = t.end_t - t.start_t
            core = dev if t.kind == "kernel" and t.unit in ("cube", "vector") else 0.0
            shapes = getattr(info, "tensors", ("",))[0] if record_shapes else ""
            stack = stacks.get(id(t), "") if stacks else ""
            out.append({"Name": getattr(info, "op", "") or t.name, "Input Shapes": shapes, "Call Stack": stack,
                        "Host Self Duration(us)": host.get(id(t), 0.0), "Host Total Duration(us)": host.get(id(t), 0.0),
                        "Device Self Duration(us)": dev, "Device Total Duration(us)": dev,
                        "Device Self Duration With AICore(us)": core, "Device Total Duration With AICore(us)": core})
    return out


def _union(spans: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _length(spans: list[tuple[float, float]]) -> float:
    return float(sum(b - a for a, b in spans))


def _overlap(xs: list[tuple[float, float]], ys: list[tuple[float, float]]) -> float:
    return float(sum(max(0.0, min(b, d) - max(a, c)) for a, b in xs for c, d in ys))


def step_row(runs: Sequence[tuple[Any, float]], device_id: int, step: int,
             window: tuple[float, float]) -> dict[str, Any]:
    """step_trace_time.csv's row of one device's step: the kernel and collective time of its
    runs in the step (each ``(run, begin)``, its times shifted onto the one clock of
    ``window``) as unions (streams overlap), their overlap, and the rest of the step's
    window as Free."""
    done = [(t, b) for run, b in runs for t in run.tasks if t.end_t is not None and t.end_t > t.start_t]
    compute = _union([(t.start_t + b, t.end_t + b) for t, b in done if t.kind == "kernel"])
    comm = _union([(t.start_t + b, t.end_t + b) for t, b in done if t.kind == "hccl"])
    receive = _union([(t.start_t + b, t.end_t + b) for t, b in done if t.kind == "hccl" and "recv" in t.name.lower()])
    computing, communication, overlapped = _length(compute), _length(comm), _overlap(compute, comm)
    lone = communication - overlapped
    total = window[1] - window[0]
    first = min((a for a, _ in compute + comm), default=window[0])
    return {"Device_id": device_id, "Step": step, "Computing": computing,
            "Communication(Not Overlapped)": lone, "Overlapped": overlapped, "Communication": communication,
            "Free": max(0.0, total - computing - lone), "Stage": total - _length(receive), "Bubble": _length(receive),
            "Communication(Not Overlapped and Exclude Receive)": max(0.0, lone - _length(receive)),
            "Preparing": max(0.0, first - window[0])}


def step_rows(runs: Sequence[Any], extras: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per device and step, over every run of that device in the step (an eager
    card's window, a Session run's card, an ACL device), in step then device order."""
    groups: dict[tuple[int, int], list[int]] = {}
    for k, (run, e) in enumerate(zip(runs, extras)):
        groups.setdefault((int(e["step"]), run.device_id), []).append(k)
    out = []
    for (step, device), ks in sorted(groups.items()):
        window = (min(extras[k]["window"][0] for k in ks), max(extras[k]["window"][1] for k in ks))
        out.append(step_row([(runs[k], float(extras[k].get("begin", 0.0))) for k in ks], device, step, window))
    return out


def memory_rows(records: Sequence[tuple[int, float, int, int, int, int]]) -> list[dict[str, Any]]:
    """memory_record.csv from (device, host us, allocated, reserved, active, stream ptr) samples."""
    return [{"Component": "PTA", "Timestamp(us)": float(t), "Total Allocated(MB)": a / MB, "Total Reserved(MB)": r / MB,
             "Total Active(MB)": act / MB, "Stream Ptr": ptr, "Device Type": f"NPU:{d}"}
            for d, t, a, r, act, ptr in records]


def _fill(folder: Path, runs: Sequence[Any], extras: Sequence[dict[str, Any]], memory: Memory | None,
          config: dict[str, Any], stacks: dict[int, str] | None) -> None:
    out = folder / OUTPUT
    out.mkdir()
    (folder / "profiler_info.json").write_text(json.dumps({"config": config, "source": "graphexec"}, indent=1),
                                               encoding="utf-8")
    with open(out / "trace_view.json", "w", encoding="utf-8") as f:
        json.dump(merged_timeline(runs, extras), f, default=str)
    steps = [int(e["step"]) for e in extras]
    begins = [float(e.get("begin", 0.0)) for e in extras]
    write_csv(str(out / "kernel_details.csv"), KERNEL_COLUMNS, kernel_rows(runs, steps, begins))
    shapes = bool(config.get("record_shapes"))
    write_csv(str(out / "operator_details.csv"), OPERATOR_COLUMNS, operator_rows(runs, shapes, stacks))
    rows = [r for run in runs for r in op_rows(run)]
    write_csv(str(out / "op_statistic.csv"), STATISTIC_COLUMNS, op_statistic(rows))
    write_csv(str(out / "step_trace_time.csv"), STEP_COLUMNS, step_rows(runs, extras))
    write_csv(str(out / "api_statistic.csv"), API_COLUMNS, api_rows(runs))
    if memory is not None:
        samples, blocks = memory
        write_csv(str(out / "memory_record.csv"), MEMORY_COLUMNS, memory_rows(samples))
        write_csv(str(out / "operator_memory.csv"), OPERATOR_MEMORY_COLUMNS, operator_memory_rows(blocks, runs, extras))
    comm, matrix = communication(runs, extras)
    if comm:
        for name, doc in (("communication.json", comm), ("communication_matrix.json", matrix)):
            (out / name).write_text(json.dumps(doc, indent=1), encoding="utf-8")


def write_ascend_pt(root: str | os.PathLike[str], worker: str, stamp: str, runs: Sequence[Any],
                    extras: Sequence[dict[str, Any]], memory: Memory | None, config: dict[str, Any],
                    stacks: dict[int, str] | None = None) -> Path:
    """Write one ``<worker>_<stamp>_ascend_pt`` folder under ``root`` (whole, by a rename); returns it.

    ``extras[k]`` carries run k's ``step``, ``window`` (host us), ``begin`` where the steps
    were laid out (``ascend_steps.lay_out``) and, where known, ``stats`` and ``diagnosis``;
    ``memory`` is None unless memory was recorded, else the allocator's samples and the
    blocks they took and gave back (``npu._prof_export.blocks``); ``stacks`` maps a
    task's id to its call stack (``with_stack``). Raises OSError."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    target, n = root / f"{worker}_{stamp}_ascend_pt", 1
    while target.exists():
        n += 1
        target = root / f"{worker}_{stamp}_{n}_ascend_pt"
    tmp = Path(tempfile.mkdtemp(dir=root, prefix=f".{target.name}-"))
    try:
        _fill(tmp, runs, extras, memory, config, stacks)
        os.chmod(tmp, folder_mode())
        os.rename(tmp, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target
