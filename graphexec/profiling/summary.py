"""msprof-style per-task and per-op-type tables: ``op_summary.csv`` and ``op_statistic.csv``.

Column names follow msprof's so the files read like the ones people already know
(ascend-runtime-facts.md §5); FLOPs, Bytes and Bound are graphexec's additions. Bound is
the device profile's roofline for the task alone: its compute time on the cores it may
use against its bytes over the whole HBM bandwidth, and "overhead" when both are shorter
than the fixed cost of a task (device dispatch or host launch, whichever is larger).
Host Kernel says what computed the task's values on the host: "own" (graphexec's numpy
kernel) or "reference" (onnx.reference's Python, far slower: the ops to look at when a run
is slow on the host; the run summary gives their host time).

Collectives are rows too, as msprof and torch_npu list them: Task Type ``HCCL``, OP Type
the HCOM name (``hcom_allReduce_``), Op Name that with ``_<n>_<rank>`` (the n-th such call
of the record on that rank, as communication.json's keys count them), Bytes the rank's
buffer, Bound ``communication``; they are left out of the kernel causes (``KERNEL_ROWS``).
"""

from __future__ import annotations

import csv
from typing import Any, Iterable, Sequence

import numpy as np

from graphexec._render import csv_cell
from graphexec.profiling.counters import WORK
from graphexec.profiling.record import RunRecord

SUMMARY_COLUMNS = ("Op Name", "OP Type", "Task Type", "Stream ID", "Task Start Time(us)", "Task Duration(us)",
                   "Task Wait Time(us)", "Block Dim", "Input Shapes", "Input Data Types", "Output Shapes",
                   "Output Data Types", "FLOPs", "Bytes", "Bound", "Host Kernel")
HCOM_TYPES = {"HcclAllReduce": "hcom_allReduce_", "HcclAllGather": "hcom_allGather_",
              "HcclReduceScatter": "hcom_reduceScatter_", "HcclBroadcast": "hcom_broadcast_",
              "HcclSend": "hcom_send_", "HcclRecv": "hcom_receive_"}
NOT_KERNELS = ("MEMCPY_ASYNC", "HCCL")   # Task Types that are no kernel of the run's own
STATISTIC_COLUMNS = ("OP Type", "Core Type", "Count", "Total Time(us)", "Avg Time(us)", "Min Time(us)",
                     "Max Time(us)", "Ratio(%)")


def roofline(t: Any, profile: Any) -> tuple[str, float, float]:
    """(bound, compute us, memory us) of one device task by the profile's roofline."""
    if t.kind == "memcpy":
        kind = getattr(t, "copy_kind", "d2d")
        if kind.startswith("p2p"):   # a copy between cards: its link (the system's, not the device's) bounds it
            return "memory", 0.0, float(t.end_t - t.start_t) if t.end_t is not None else 0.0
        return "memory", 0.0, t.bytes / profile.copy_bytes_per_us(kind)
    unit = t.unit if t.unit in ("cube", "aicpu") else "vector"
    cores, per_core = profile.unit_cores(unit), profile.unit_rate(unit, t.dtype)
    compute = t.flops / (per_core * max(1, min(t.block_dim, cores)))
    memory = t.bytes / profile.hbm_bytes_per_us
    if max(compute, memory) < max(profile.task_overhead_us, profile.launch_cost_us):
        return "overhead", compute, memory
    return ("compute" if compute >= memory else "memory"), compute, memory


def task_type(t: Any, profile: Any) -> str:
    """msprof's Task Type: AI_CORE, AI_VECTOR_CORE (vector units of a separated device), AI_CPU,
    MEMCPY_ASYNC, HCCL."""
    if t.kind == "hccl":
        return "HCCL"
    if t.kind == "memcpy":
        return "MEMCPY_ASYNC"
    if t.unit == "aicpu":
        return "AI_CPU"
    return "AI_VECTOR_CORE" if t.unit == "vector" and not profile.coupled else "AI_CORE"


def _onnx_dtype(dtype: Any) -> str:
    try:
        import onnx

        return onnx.TensorProto.DataType.Name(onnx.helper.np_dtype_to_tensor_dtype(np.dtype(dtype)))
    except (TypeError, ValueError, KeyError):
        return str(dtype).upper()


def tensor_cells(graph: Any, names: Iterable[str]) -> tuple[str, str]:
    """msprof's shape and dtype cells: one entry per tensor, ``;`` between tensors."""
    shapes, dtypes = [], []
    for name in names:
        value = graph.values.get(name) if graph is not None else None
        ty = value.type if value is not None else None
        shape = None if ty is None else ty.shape
        shapes.append("?" if shape is None else ",".join("?" if not isinstance(d, int) else str(d) for d in shape))
        dtypes.append("?" if ty is None or ty.dtype is None else _onnx_dtype(ty.dtype))
    return ";".join(shapes), ";".join(dtypes)


def _row(t: Any, wait: float, graph: Any, profile: Any, runners: Any) -> dict[str, Any]:
    task = t.meta.get("task")
    node = getattr(task, "node", None)
    cells = getattr(task, "tensors", None)
    if node is None and cells:   # an eager op's, worked out once when its plan was made
        ins, in_types, outs, out_types = cells
    else:
        ins, in_types = tensor_cells(graph, node.inputs if node is not None else [])
        outs, out_types = tensor_cells(graph, node.outputs if node is not None else [])
    op = getattr(task, "op", "") or t.meta.get("op", "") or ("MemcpyAsync" if t.kind == "memcpy" else t.name)
    return {"Op Name": t.name, "OP Type": op,
            "Task Type": task_type(t, profile), "Stream ID": t.stream.id, "Task Start Time(us)": t.start_t,
            "Task Duration(us)": t.end_t - t.start_t, "Task Wait Time(us)": wait, "Block Dim": t.block_dim,
            "Input Shapes": ins, "Input Data Types": in_types, "Output Shapes": outs,
            "Output Data Types": out_types, "FLOPs": int(round(t.flops)), "Bytes": int(round(t.bytes)),
            "Bound": roofline(t, profile)[0], "Host Kernel": _host_kernel(t, runners)}


def hcom_type(name: str) -> str:
    """The HCOM op type of a collective task named ``HcclAllReduce`` (or ``HcclAllReduce x``)."""
    call = name.split(" ")[0]
    return HCOM_TYPES.get(call, call)


def _comm_row(t: Any, wait: float, n: int) -> dict[str, Any]:
    """A collective's row: the rank's part, from its call to the last rank's end."""
    op = hcom_type(t.name)
    return {"Op Name": f"{op}_{n}_{t.meta.get('rank', '')}", "OP Type": op, "Task Type": "HCCL",
            "Stream ID": t.stream.id, "Task Start Time(us)": t.start_t, "Task Duration(us)": t.end_t - t.start_t,
            "Task Wait Time(us)": wait, "Block Dim": 0, "Input Shapes": "", "Input Data Types": "",
            "Output Shapes": "", "Output Data Types": "", "FLOPs": 0, "Bytes": int(round(t.bytes)),
            "Bound": "communication", "Host Kernel": ""}


def _runners(record: Any) -> Any:
    """The runners of the record's plan by task id (none for a record without one)."""
    return getattr(getattr(record, "plan", None), "runners", None) or {}


def _host_kernel(t: Any, runners: Any) -> str:
    """"reference" for a task whose runner ran (or will run) through onnx.reference, "own"
    for another kernel, "" for a copy or a task without a runner."""
    task = t.meta.get("task")
    key = getattr(task, "id", None)   # an eager op's OpInfo has no task id: no plan runner
    runner = runners.get(key) if key is not None and t.kind != "memcpy" else None
    if runner is None or getattr(runner, "node", None) is not getattr(task, "node", None):   # a body's task
        return ""
    return "reference" if getattr(runner, "uses_fallback", False) else "own"


def _done(tasks: Iterable[Any]) -> list[Any]:
    """The kernels, copies and collectives that ran, in start order."""
    return sorted([t for t in tasks if t.kind in (*WORK, "hccl") and t.start_t is not None and t.end_t is not None],
                  key=lambda t: (t.start_t, t.seq))


def op_rows(record: RunRecord | Any) -> list[dict[str, Any]]:
    """One row per kernel, copy or collective in start order. Task Wait Time is msprof's:
    the gap between the end of the previous task on the same stream and this task's start."""
    last_end: dict[int, float] = {}
    calls: dict[str, int] = {}
    rows = []
    for t in _done(record.tasks):
        wait = max(0.0, t.start_t - last_end[t.stream.id]) if t.stream.id in last_end else 0.0
        last_end[t.stream.id] = t.end_t
        if t.kind == "hccl":
            op = hcom_type(t.name)
            n = calls[op] = calls.get(op, -1) + 1
            rows.append(_comm_row(t, wait, n))
        else:
            rows.append(_row(t, wait, record.graph, record.profile, _runners(record)))
    return rows


def op_statistic(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (OP Type, Task Type): count and total/avg/min/max time, most time first."""
    groups: dict[tuple[str, str], list[float]] = {}
    for r in rows:
        groups.setdefault((r["OP Type"], r["Task Type"]), []).append(r["Task Duration(us)"])
    total = sum(sum(d) for d in groups.values()) or 1.0
    out = [{"OP Type": op, "Core Type": core, "Count": len(d), "Total Time(us)": sum(d),
            "Avg Time(us)": sum(d) / len(d), "Min Time(us)": min(d), "Max Time(us)": max(d),
            "Ratio(%)": 100.0 * sum(d) / total} for (op, core), d in groups.items()]
    return sorted(out, key=lambda r: (-r["Total Time(us)"], r["OP Type"], r["Core Type"]))


def _cell(v: Any) -> Any:
    """A number with three decimals; text (names) never a spreadsheet formula."""
    return f"{v:.3f}" if isinstance(v, float) else csv_cell(v)


def write_csv(path: str, columns: Sequence[str], rows: Iterable[dict[str, Any]]) -> None:
    """Times in microseconds with three decimals (nanoseconds), as msprof writes them."""
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(columns)
        for r in rows:
            w.writerow([_cell(r[c]) for c in columns])
