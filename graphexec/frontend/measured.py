"""Read measured op durations: msprof's ``op_summary_*.csv`` (or a ``PROF_*`` folder holding
one) and Chrome-format kernel traces (PyTorch's Kineto profiler, Perfetto, graphexec's own).

- op_summary: columns ``Op Name``, ``OP Type``, ``Task Duration(us)`` (and ``Input Shapes``,
  ``Task Type`` when present); CANN's op types become ONNX's (``CANN_TO_ONNX``: Conv2D is
  Conv). Copies and other non-kernel rows (``MEMCPY_ASYNC``, collectives' ``HCCL``, events) are skipped; an op listed
  several times (steps, iterations) takes its mean.
- kernel trace: complete events (``"ph": "X"``) of category ``kernel`` / ``gpu_kernel``.
  graphexec's own trace names the op in ``args.node``/``args.op``. A Kineto trace names
  CUDA kernels, not ops: each kernel joins the ATen op that launched it by ``External id``
  (a ``cpu_op`` event), the kernels of one op are summed, the ATen name is mapped to the
  ONNX op type (``ATEN_TO_ONNX``) and its ``Input Dims`` become the input shapes; such ops
  join the graph on type and shapes (``passes/measured.py``).

Every malformed row or event is one line naming the file, the row or event and the field.
"""

from __future__ import annotations

import csv
import gzip
import json
from pathlib import Path
from typing import Any

from graphexec._render import csv_value
from graphexec.errors import CalibrationError
from graphexec.plan.measured import MeasuredOp, MeasuredTimes

SKIP_TASK_TYPES = {"MEMCPY_ASYNC", "HCCL", "EVENT_RECORD", "EVENT_WAIT", "NOTIFY_RECORD", "NOTIFY_WAIT", "WRITE_VALUE"}
KERNEL_CATS = {"kernel", "gpu_kernel"}
# CANN's op types in a real op_summary -> the ONNX op types of the graph (the common ones; an op
# ATC adds, such as TransData, has none and matches no task)
CANN_TO_ONNX = {"Conv2D": "Conv", "Conv2DTranspose": "ConvTranspose", "MatMulV2": "MatMul", "BatchMatMul": "MatMul",
                "BatchMatMulV2": "MatMul", "MaxPoolV3": "MaxPool", "AvgPoolV2": "AveragePool", "AvgPool": "AveragePool",
                "ConcatD": "Concat", "ConcatV2D": "Concat", "SoftmaxV2": "Softmax", "AddN": "Add",
                "ReduceMeanD": "ReduceMean", "GatherV2": "Gather", "TransposeD": "Transpose",
                "LayerNorm": "LayerNormalization", "FastGelu": "Gelu"}
ATEN_TO_ONNX = {
    "aten::conv2d": "Conv", "aten::convolution": "Conv", "aten::_convolution": "Conv",
    "aten::cudnn_convolution": "Conv", "aten::addmm": "Gemm", "aten::linear": "Gemm", "aten::mm": "MatMul",
    "aten::bmm": "MatMul", "aten::matmul": "MatMul", "aten::relu": "Relu", "aten::relu_": "Relu",
    "aten::add": "Add", "aten::add_": "Add", "aten::mul": "Mul", "aten::sigmoid": "Sigmoid",
    "aten::max_pool2d": "MaxPool", "aten::max_pool2d_with_indices": "MaxPool", "aten::avg_pool2d": "AveragePool",
    "aten::adaptive_avg_pool2d": "GlobalAveragePool", "aten::batch_norm": "BatchNormalization",
    "aten::cudnn_batch_norm": "BatchNormalization", "aten::native_batch_norm": "BatchNormalization",
    "aten::cat": "Concat", "aten::softmax": "Softmax", "aten::_softmax": "Softmax", "aten::gelu": "Gelu",
    "aten::layer_norm": "LayerNormalization", "aten::native_layer_norm": "LayerNormalization",
}


def load_measured(path: str | Path) -> MeasuredTimes:
    """Measured op durations from an op_summary CSV, a PROF_ folder or a JSON trace."""
    path = Path(path)
    if path.is_dir():
        found = sorted(path.rglob("op_summary*.csv"))
        if len(found) != 1:
            raise CalibrationError(f"{path}: expected one op_summary*.csv under it, found {len(found)}")
        path = found[0]
    if path.suffix.lower() == ".csv":
        return read_op_summary(path)
    if path.name.lower().endswith((".json", ".json.gz")):
        return read_kernel_trace(path)
    raise CalibrationError(f"{path}: measured durations come from an op_summary .csv, a PROF_ folder or a "
                           ".json trace")


def _collect(rows: list[tuple[str, str, str, float]], source: str) -> MeasuredTimes:
    """One MeasuredOp per (name, type, shapes), repeated ones averaged, first-seen order."""
    sums: dict[tuple[str, str, str], list[float]] = {}
    for name, op, shapes, us in rows:
        sums.setdefault((name, op, shapes), []).append(us)
    return MeasuredTimes(tuple(MeasuredOp(n, o, s, sum(v) / len(v)) for (n, o, s), v in sums.items()), source)


def read_op_summary(path: str | Path) -> MeasuredTimes:
    """The kernel rows of an msprof op_summary CSV (graphexec writes the same columns)."""
    path = Path(path)
    rows = []
    try:
        with path.open(newline="", encoding="utf-8-sig") as f:
            reader = csv.DictReader(f)
            need = ("Op Name", "OP Type", "Task Duration(us)")
            if missing := [c for c in need if c not in (reader.fieldnames or [])]:
                raise CalibrationError(f"{path}: no column {', '.join(repr(c) for c in missing)} (an msprof "
                                       "op_summary has them)")
            for i, row in enumerate(reader, start=2):
                if (row.get("Task Type") or "").strip() in SKIP_TASK_TYPES:
                    continue
                text = (row.get("Task Duration(us)") or "").strip()
                try:
                    us = float(text)
                except ValueError:
                    raise CalibrationError(f"{path} row {i}: field 'Task Duration(us)': {text!r} is not a "
                                           "number") from None
                if not 0 <= us < float("inf"):
                    raise CalibrationError(f"{path} row {i}: field 'Task Duration(us)': {text!r} is negative")
                name = csv_value((row.get("Op Name") or "").strip())
                if not name:
                    raise CalibrationError(f"{path} row {i}: field 'Op Name' is empty")
                op = csv_value((row.get("OP Type") or "").strip())
                rows.append((name, CANN_TO_ONNX.get(op, op), (row.get("Input Shapes") or "").strip(), us))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise CalibrationError(f"{path}: cannot read the op summary: {exc}") from None
    if not rows:
        raise CalibrationError(f"{path}: no kernel rows")
    return _collect(rows, str(path))


def _events(path: Path) -> list[Any]:
    try:
        raw = path.read_bytes()
        doc = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    except (OSError, ValueError, EOFError) as exc:
        raise CalibrationError(f"{path}: not a JSON trace: {exc}") from None
    events = doc.get("traceEvents") if isinstance(doc, dict) else doc
    if not isinstance(events, list):
        raise CalibrationError(f"{path}: no 'traceEvents' list (a Chrome/Kineto/Perfetto JSON trace)")
    return events


def _dims(args: dict[str, Any]) -> str:
    dims = args.get("Input Dims") or []
    return ";".join(",".join(str(int(d)) for d in shape) for shape in dims if isinstance(shape, list) and shape)


def read_kernel_trace(path: str | Path) -> MeasuredTimes:
    """The GPU/NPU kernels of a Chrome-format trace as measured ops (module docstring)."""
    path = Path(path)
    events = _events(path)
    ops: dict[Any, dict[str, Any]] = {}
    for e in events:
        if isinstance(e, dict) and e.get("ph") == "X" and e.get("cat") == "cpu_op":
            ext = (e.get("args") or {}).get("External id")
            if ext is not None and e.get("name") in ATEN_TO_ONNX:
                ops.setdefault(ext, {"name": e["name"], "dims": _dims(e.get("args") or {})})
    rows: dict[Any, list[Any]] = {}
    for i, e in enumerate(events):
        if not (isinstance(e, dict) and e.get("ph") == "X" and str(e.get("cat", "")).lower() in KERNEL_CATS):
            continue
        dur, args = e.get("dur"), e.get("args") or {}
        if isinstance(dur, bool) or not isinstance(dur, (int, float)) or not 0 <= dur < float("inf"):
            raise CalibrationError(f"{path} event {i} ({str(e.get('name'))[:40]}): field 'dur': {dur!r} is not a "
                                   "duration in us")
        if "node" in args:   # graphexec's own trace: the op is named
            key: Any = ("node", args["node"], args.get("op", ""))
            rows.setdefault(key, [args["node"], args.get("op", ""), "", 0.0])[3] += float(dur)
        elif args.get("External id") in ops:
            op = ops[args["External id"]]
            key = ("ext", args["External id"])
            rows.setdefault(key, [f"{op['name']}#{args['External id']}", ATEN_TO_ONNX[op["name"]], op["dims"],
                                  0.0])[3] += float(dur)
    if not rows:
        raise CalibrationError(f"{path}: no kernel events that name an op (cat 'kernel' with args.node, or joined "
                               "to an ATen cpu_op by 'External id')")
    return _collect([tuple(r) for r in rows.values()], str(path))   # type: ignore[misc]
