"""Measurement tables a calibration reads, each row turned into one ``Measurement``.

- Whole-model CSV (the form of ``benchmarks/data/calibration_models.csv``): one row per
  measured run, with columns ``model`` (an .onnx/.yaml file; a relative path is looked up
  in the models folder, default the CSV's own folder), ``shapes`` (``input=8x3x224x224``,
  several joined by ``;``), ``device`` (the profile the row was measured on), ``measured``
  and ``unit`` (``us``, ``ms``, ``s``, or ``fps``: items per second, the batch being the
  ``batch`` column or else the first input's first dimension); optional ``streams``
  (default 1), ``configuration`` (a label) and ``source``. A run over several cards names a
  system in ``device`` and gives ``devices`` (cards) and ``parallel`` (data, pipeline, tensor
  or auto; default data), as ``Session(devices=, parallel=, system=)`` takes them.
- Collective tables as ``nccl-tests`` prints them (``all_reduce_perf`` ...: the header
  ``size count type redop root time algbw busbw ...``, the out-of-place ``time`` in us) and
  as ``hccl_test`` prints them (``data_size(Bytes) | aveg_time(us) | alg_bandwidth(GB/s) |
  check_result``). The collective comes from nccl-tests' "Collective test starting" line or
  the file name (``all_gather``...), the rank count from its "Rank N" lines; either can be
  given instead. Sizes of 0 bytes are skipped (no data moves).

A malformed row is a one-line ``CalibrationError`` naming the file, the row and the field.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from pathlib import Path

from graphexec.errors import CalibrationError

TIME_UNITS = {"us": 1.0, "ms": 1e3, "s": 1e6}
RATE_UNITS = ("fps", "items/s")
PARALLEL = ("data", "pipeline", "tensor", "auto")
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "broadcast")
NCCL_TYPES = {"float": "float32", "half": "float16", "double": "float64", "bfloat16": "float16",
              "int8": "int8", "uint8": "uint8", "int32": "int32", "uint32": "uint32", "int64": "int64",
              "uint64": "uint64", "int": "int32", "fp32": "float32", "fp16": "float16", "bf16": "float16"}


@dataclass(frozen=True)
class Measurement:
    """One measured time: what ran (a model with shapes, or a collective) and how long."""

    kind: str                     # "model", "op" or "collective"
    label: str
    measured_us: float
    where: str                    # "FILE row N": what an error or a source names
    source: str = ""
    device: str = ""              # the profile the row was measured on (model rows)
    model: str = ""
    shapes: tuple[tuple[str, tuple[int, ...]], ...] = ()
    streams: int | str = 1
    collective: str = ""
    nbytes: int = 0
    ranks: int = 0
    dtype: str = "float32"
    op: tuple[str, str, str] = ("", "", "")   # an op row's name, type and input shapes (msprof's)
    cards: int = 1                # a model row run over several cards of a system ...
    parallel: str = "data"        # ... spread this way


def _shapes(text: str, where: str) -> tuple[tuple[str, tuple[int, ...]], ...]:
    out = []
    for part in (p.strip() for p in text.split(";") if p.strip()):
        name, eq, dims = part.partition("=")
        sizes = [d.strip() for d in re.split(r"[x,]", dims) if d.strip()]
        if not eq or not name.strip() or not sizes or not all(d.isdigit() for d in sizes):
            raise CalibrationError(f"{where}: field 'shapes': {part!r} is not NAME=D1xD2x...")
        out.append((name.strip(), tuple(int(d) for d in sizes)))
    if not out:
        raise CalibrationError(f"{where}: field 'shapes' is empty")
    return tuple(out)


def _number(row: dict[str, str], field: str, where: str) -> float:
    text = (row.get(field) or "").strip()
    try:
        value = float(text)
    except ValueError:
        raise CalibrationError(f"{where}: field '{field}': {text!r} is not a number") from None
    if not value > 0 or value == float("inf"):
        raise CalibrationError(f"{where}: field '{field}': {text!r} must be a positive number")
    return value


def _model_row(row: dict[str, str], where: str, models: Path) -> Measurement:
    for field in ("model", "shapes", "device", "unit"):
        if not (row.get(field) or "").strip():
            raise CalibrationError(f"{where}: field '{field}' is empty")
    shapes = _shapes(row["shapes"], where)
    measured, unit = _number(row, "measured", where), row["unit"].strip()
    if unit in TIME_UNITS:
        us = measured * TIME_UNITS[unit]
    elif unit in RATE_UNITS:
        batch = _number(row, "batch", where) if (row.get("batch") or "").strip() else shapes[0][1][0]
        us = batch / measured * 1e6
    else:
        raise CalibrationError(f"{where}: field 'unit': {unit!r} is not one of {', '.join([*TIME_UNITS, *RATE_UNITS])}")
    streams_text = (row.get("streams") or "1").strip()
    if streams_text != "auto" and not (streams_text.isdigit() and int(streams_text) >= 1):
        raise CalibrationError(f"{where}: field 'streams': {streams_text!r} is not an int >= 1 or 'auto'")
    cards_text = (row.get("devices") or "1").strip()
    if not (cards_text.isdigit() and int(cards_text) >= 1):
        raise CalibrationError(f"{where}: field 'devices': {cards_text!r} is not an int >= 1")
    parallel = (row.get("parallel") or "data").strip()
    if parallel not in PARALLEL:
        raise CalibrationError(f"{where}: field 'parallel': {parallel!r} is not one of {', '.join(PARALLEL)}")
    model = Path(row["model"].strip()).expanduser()
    label = (row.get("configuration") or "").strip() or f"{model.stem} {row['shapes'].strip()}"
    return Measurement("model", label, us, where, (row.get("source") or "").strip(), row["device"].strip().lower(),
                       str(model if model.is_absolute() else models / model), shapes,
                       "auto" if streams_text == "auto" else int(streams_text), cards=int(cards_text),
                       parallel=parallel)


def read_ops(path: str | Path, model: str | Path, shapes: str, device: str) -> list[Measurement]:
    """The kernels of an msprof op_summary (or kernel trace) of one run of ``model`` at
    ``shapes`` (``data=4x192x28x28;...``) on ``device``, one row per op (repeats averaged)."""
    from graphexec.frontend.measured import load_measured

    where = f"{path}"
    parsed = _shapes(shapes, f"{where}: --ops-shapes")
    model = Path(model).expanduser()
    measured = load_measured(path)
    return [Measurement("op", f"{o.name} ({o.op})", o.us, f"{where} op {i}", str(path), device.lower(), str(model),
                        parsed, op=(o.name, o.op, o.shapes)) for i, o in enumerate(measured.ops, start=1) if o.us > 0]


def read_models_csv(path: str | Path, models: str | Path | None = None) -> list[Measurement]:
    """Every row of a whole-model measurement CSV (see the module docstring)."""
    path = Path(path)
    folder = Path(models).expanduser() if models is not None else path.parent
    try:
        with path.open(newline="", encoding="utf-8-sig") as f:   # a spreadsheet's BOM is not a column name
            reader = csv.DictReader(f)
            header = reader.fieldnames or []
            missing = [c for c in ("model", "shapes", "device", "measured", "unit") if c not in header]
            if missing:
                raise CalibrationError(f"{path}: no column {', '.join(repr(c) for c in missing)} in the header")
            return [_model_row(row, f"{path} row {i}", folder) for i, row in enumerate(reader, start=2)]
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise CalibrationError(f"{path}: cannot read the measurements: {exc}") from None


def _collective_name(text: str, path: Path, given: str | None) -> str:
    if given:
        name = given
    elif m := re.search(r"Collective test starting:\s*(\w+?)_perf", text):
        name = m[1]
    else:
        name = next((c for c in COLLECTIVES if c in path.name.lower().replace("-", "_")), "")
    if name not in COLLECTIVES:
        raise CalibrationError(f"{path}: cannot tell which collective this table measured (give it: "
                               f"{', '.join(COLLECTIVES)})")
    return name


def read_collective_table(path: str | Path, collective: str | None = None, ranks: int | None = None,
                          source: str = "") -> list[Measurement]:
    """The rows of an nccl-tests or hccl_test output (see the module docstring)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise CalibrationError(f"{path}: cannot read the collective table: {exc.strerror or exc}") from None
    kind = _collective_name(text, path, collective)
    found = len(set(re.findall(r"^#?\s*Rank\s+(\d+)", text, flags=re.M)))
    p = ranks or found
    if not p or p < 2:
        raise CalibrationError(f"{path}: cannot tell the rank count from the table (give it: 2 or more ranks)")
    lines = text.splitlines()
    if any("data_size" in line and "aveg_time" in line for line in lines):
        rows = _hccl_rows(lines, path)
    else:
        rows = _nccl_rows(lines, path)
    if not rows:
        raise CalibrationError(f"{path}: no rows of measurements found (an nccl-tests or hccl_test table)")
    return [Measurement("collective", f"{p}x {kind} {size} B {dtype}", us, f"{path} line {n}", source,
                        collective=kind, nbytes=size, ranks=p, dtype=dtype) for n, size, dtype, us in rows if size]


def _nccl_rows(lines: list[str], path: Path) -> list[tuple[int, int, str, float]]:
    header: list[str] | None = None
    rows = []
    for n, line in enumerate(lines, start=1):
        tokens = line.replace("#", " # ").split()
        words = [t for t in tokens if t != "#"]
        if "size" in words and "time" in words and "count" in words:
            header = [t for t in line.lstrip("# ").split()]
            continue
        if header is None or not words or not words[0].isdigit() or line.lstrip().startswith("#"):
            continue
        where = f"{path} line {n}"
        if len(words) < header.index("time") + 1:
            raise CalibrationError(f"{where}: {len(words)} fields, the header has {len(header)}")
        try:
            us = float(words[header.index("time")])
        except ValueError:
            raise CalibrationError(f"{where}: field 'time': {words[header.index('time')]!r} is not a number") from None
        dtype = words[header.index("type")] if "type" in header else "float"
        if dtype not in NCCL_TYPES:
            raise CalibrationError(f"{where}: field 'type': {dtype!r} is not one of {', '.join(NCCL_TYPES)}")
        if not us > 0:
            raise CalibrationError(f"{where}: field 'time': {us!r} must be positive")
        rows.append((n, int(words[0]), NCCL_TYPES[dtype], us))
    return rows


def _hccl_rows(lines: list[str], path: Path) -> list[tuple[int, int, str, float]]:
    rows, started = [], False
    for n, line in enumerate(lines, start=1):
        if "data_size" in line and "aveg_time" in line:
            started = True
            continue
        cells = [c.strip() for c in line.split("|")]
        if not started or len(cells) < 2 or not cells[0].isdigit():
            continue
        try:
            us = float(cells[1])
        except ValueError:
            raise CalibrationError(f"{path} line {n}: field 'aveg_time': {cells[1]!r} is not a number") from None
        if not us > 0:
            raise CalibrationError(f"{path} line {n}: field 'aveg_time': {us!r} must be positive")
        rows.append((n, int(cells[0]), "float32", us))
    return rows
