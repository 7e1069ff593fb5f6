"""Where a sweep's rows go: a CSV (appended a whole row at a time and flushed) or a
Parquet file (rewritten whole, atomically, at most once a second: a rewrite per row made a
sweep of thousands of points quadratic; a row waits at most a second, a timer writes it
if no other row comes, and the rest are written when the sweep ends or is interrupted).
Either can be read back, so a sweep run again skips the points it already has: an
interrupted sweep resumes, losing no finished row and repeating none (a killed one loses
at most its last second of Parquet rows, which run again)."""

from __future__ import annotations

import csv
import io
import os
import threading
import time
from pathlib import Path
from typing import Any, Iterator

from graphexec._render import csv_cell, csv_value
from graphexec.errors import GraphExecError
from graphexec.sweep.grid import KEY
from graphexec.sweep.point import COLUMNS, NUMBERS


class CsvOutput:
    """Rows as CSV lines; a last line cut short (the process killed mid-write) is dropped."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.rows = list(self._read()) if path.exists() and path.stat().st_size else []
        new = not path.exists() or path.stat().st_size == 0
        self._file = open(path, "a", newline="", encoding="utf-8")
        if new:
            self._write(list(COLUMNS))

    def _read(self) -> Iterator[dict[str, Any]]:
        raw = self.path.read_bytes()
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise GraphExecError(f"{self.path}: not a sweep's output (not UTF-8 text); give another --output") from None
        header = next(csv.reader(io.StringIO(text.split("\n", 1)[0])), None)
        if header != list(COLUMNS):   # checked before anything is cut: someone else's file stays whole
            raise GraphExecError(f"{self.path}: not a sweep's output (its columns differ from a sweep's); "
                                 "give another --output")
        if not text.endswith("\n"):   # a row cut short: drop it, it is run again
            keep = raw.rfind(b"\n") + 1
            with open(self.path, "r+b") as f:
                f.truncate(keep)
            text = raw[:keep].decode("utf-8")
        reader = csv.reader(io.StringIO(text))
        next(reader, None)
        for values in reader:
            yield parse(dict(zip(COLUMNS, values)))

    def _write(self, values: list[Any]) -> None:
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\r\n").writerow(values)   # "\r\n": a cell holding a CR is quoted too
        self._file.write(buf.getvalue()[:-2] + "\n")   # one write of the whole line, then flushed: never half a row
        self._file.flush()

    def append(self, row: dict[str, Any]) -> None:
        self._write(["" if row[c] is None else csv_cell(row[c]) for c in COLUMNS])   # no cell a formula
        self.rows.append(row)

    def close(self) -> None:
        self._file.close()


FLUSH_S = 1.0   # seconds between Parquet rewrites


class ParquetOutput:
    """Rows in a Parquet file (pyarrow), rewritten through a temporary file and renamed."""

    def __init__(self, path: Path) -> None:
        try:
            import pyarrow as pa
            import pyarrow.parquet as pq
        except ImportError as e:
            raise GraphExecError(f"{path}: writing Parquet needs pyarrow (pip install pyarrow, or "
                                 "pip install -e '.[cluster]'); or give a .csv --output") from e
        self.path, self._pa, self._pq = path, pa, pq
        self.rows: list[dict[str, Any]] = []
        self._pending, self._written = False, -FLUSH_S   # the first row is written at once
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None
        if path.exists():
            table = pq.read_table(path)
            if table.column_names != list(COLUMNS):
                raise GraphExecError(f"{path}: not a sweep's output (its columns differ from a sweep's); "
                                     "give another --output")
            self.rows = table.to_pylist()

    def append(self, row: dict[str, Any]) -> None:
        with self._lock:
            self.rows.append(row)
            self._pending = True
            if time.monotonic() - self._written >= FLUSH_S:
                self._flush()
            elif self._timer is None:   # no later row may come for a while: write it then anyway
                self._timer = threading.Timer(FLUSH_S, self._flush_pending)
                self._timer.daemon = True
                self._timer.start()

    def _flush_pending(self) -> None:
        with self._lock:
            self._timer = None
            if self._pending:
                self._flush()

    def _flush(self) -> None:
        tmp = self.path.with_name(self.path.name + ".tmp")
        types = {c: self._pa.int64() if NUMBERS.get(c) is int else self._pa.float64() if c in NUMBERS
                 else self._pa.string() for c in COLUMNS}
        schema = self._pa.schema([(c, types[c]) for c in COLUMNS])
        self._pq.write_table(self._pa.Table.from_pylist(self.rows, schema=schema), tmp)
        os.replace(tmp, self.path)
        self._pending, self._written = False, time.monotonic()

    def close(self) -> None:
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            if self._pending:
                self._flush()


def open_output(path: str | Path) -> CsvOutput | ParquetOutput:
    """The output for ``path`` by its suffix, its earlier rows read."""
    p = Path(path)
    if p.suffix == ".csv":
        return CsvOutput(p)
    if p.suffix == ".parquet":
        return ParquetOutput(p)
    raise GraphExecError(f"--output {p}: give a .csv or a .parquet file")


def parse(text: dict[str, str]) -> dict[str, Any]:
    """A CSV row's values as a sweep made them: numbers typed, empty cells None (the key's
    text columns stay text: "" is the default policy, not a missing one)."""
    row: dict[str, Any] = {}
    for c, v in text.items():
        if c in NUMBERS:
            row[c] = None if v == "" else NUMBERS[c](v)
        else:
            row[c] = csv_value(v) if (v != "" or c in KEY) else None
    return row
