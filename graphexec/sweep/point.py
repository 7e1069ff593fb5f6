"""One point of a sweep, run where a worker is (this process, a pool process or a Ray
task): a fresh ``Session`` of the point's options, a timing-only ``simulate`` (or with
``verify`` a full run, its outputs digested), one row. A failure is a row with its error
line, never an exception: a sweep does not stop for one bad configuration."""

from __future__ import annotations

import hashlib
import time
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from graphexec.api.session import Session
from graphexec.engine.feeds import default_feeds
from graphexec.errors import GraphExecError
from graphexec.ir import Graph
from graphexec.passes.free_batch import free_batch
from graphexec.sweep.grid import KEY, Point

# column -> type; a row read back from a CSV is converted with these ("" stays None)
NUMBERS: dict[str, type] = {
    "devices": int, "batch": int, "makespan_us": float, "lower_bound_us": float, "speedup": float, "num_tasks": int,
    "num_events": int, "peak_bytes": int, "cube_utilization": float, "vector_utilization": float,
    "hbm_utilization": float, "compile_s": float, "simulate_s": float,
}
COLUMNS = KEY + ("batch", "makespan_us", "lower_bound_us", "speedup", "num_tasks", "num_events", "peak_bytes",
                 "cube_utilization", "vector_utilization", "hbm_utilization", "cause", "computed",
                 "compile_s", "simulate_s", "outputs_sha256", "verified", "error")
TIMES = ("compile_s", "simulate_s")   # host seconds: the only columns that differ from run to run


@dataclass(frozen=True)
class Job:
    """What a worker needs beside the model: the point and how to run it."""

    point: Point
    batch: int | None = None     # axis 0 of the first input (None: as declared)
    verify: bool = False         # compute the outputs and digest them
    diagnose: bool = True        # fill ``cause`` (a few more timing-only simulations)


def empty_row(point: Point) -> dict[str, Any]:
    row: dict[str, Any] = dict.fromkeys(COLUMNS)
    row.update(asdict(point))
    return row


def run_point(graph: Graph, job: Job) -> dict[str, Any]:
    """The row of ``job.point`` on ``graph``; errors are the row's ``error``, one line."""
    row = empty_row(job.point)
    try:
        _fill(row, graph, job)
    except Exception as e:   # a sweep never crashes on one point
        row["error"] = error_line(e)
    return row


def _fill(row: dict[str, Any], graph: Graph, job: Job) -> None:
    shapes = batch_shapes(graph, job.batch)
    point = job.point
    if shapes and point.devices == 1 and any(_fixed_other(graph.values[n].type.shape, s) for n, s in shapes.items()):
        graph = free_batch(graph)   # one card runs the whole batch: a declared fixed batch must give way
    session = Session(graph, **point.session_options())
    t0 = time.perf_counter()
    if job.verify:
        result = session.run(default_feeds(session.graph, shapes, session.profile))
        row["outputs_sha256"] = digest(result.outputs)
    else:
        result = session.simulate(shapes=shapes)
    wall = time.perf_counter() - t0
    s = result.stats
    for c in ("makespan_us", "lower_bound_us", "num_tasks", "num_events", "peak_bytes", "cube_utilization",
              "vector_utilization", "hbm_utilization", "compile_s"):
        row[c] = NUMBERS[c](getattr(s, c))   # plain Python numbers: the same in a CSV, Parquet or a pickle
    row.update(computed=s.extra.get("computed"), simulate_s=max(0.0, wall - s.compile_s))
    if job.diagnose:
        row["cause"] = result.diagnosis.reason


def batch_shapes(graph: Graph, batch: int | None) -> dict[str, tuple[int, ...]] | None:
    """Shapes that set axis 0 to ``batch`` in the first tensor input and every input that
    declares the same axis 0 (the same symbol or size); other dims as declared, a symbolic
    one 1 (as ``default_feeds`` makes them)."""
    if batch is None:
        return None
    shapes = [(n, t.shape) for n, t in ((n, graph.values[n].type) for n in graph.inputs)
              if t.kind == "tensor" and t.shape]
    if not shapes:
        raise GraphExecError(f"{graph.source}: no input has an axis 0 for --batch")
    first = shapes[0][1][0]
    return {n: (int(batch), *(d if isinstance(d, int) and d >= 0 else 1 for d in shape[1:]))
            for n, shape in shapes if shape[0] == first}


def _fixed_other(declared: tuple | None, shape: tuple[int, ...]) -> bool:
    """Whether a declared axis 0 is a size other than ``shape``'s."""
    return declared is not None and len(declared) > 0 and isinstance(declared[0], int) and declared[0] != shape[0]


def digest(outputs: dict[str, Any]) -> str:
    """sha256 of the outputs in order: names, dtypes, shapes and bytes (bit-identity)."""
    h = hashlib.sha256()
    for name, value in outputs.items():
        arr = np.ascontiguousarray(value) if isinstance(value, np.ndarray) else np.asarray(repr(value))
        h.update(f"{name}|{arr.dtype.str}|{arr.shape}|".encode())
        h.update(arr.tobytes())
    return h.hexdigest()


def first_line(text: str) -> str:
    """The first line of a message, or "(no message)" when it has none."""
    return (text.strip().splitlines() or ["(no message)"])[0]


def error_line(e: Exception) -> str:
    """A row's error: bad input as its own first line, anything else as the bug it is."""
    return first_line(str(e) if isinstance(e, GraphExecError) else f"internal error: {type(e).__name__}: {e}")
