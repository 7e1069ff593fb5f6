"""Design-space sweeps: every model of a zoo over devices, stream counts, policies, card
counts and parallel modes, one timing-only run and one row per point.

Example:
    >>> import graphexec as gx
    >>> rows = gx.sweep("models/", device=["ascend910", "ascend910b"], streams=[1, 2, 4],
    ...                 policy=["ge", "list"], output="results.csv")
    >>> rows[0]["makespan_us"], rows[0]["speedup"]

Points run on a backend (``sweep_local``: a process pool, default; ``sweep_ray``: Ray
tasks) and come back in the grid's order (``sweep_grid``); each row is appended to the
output as it comes (``sweep_output``), so a sweep run again with the same output skips
the points it has. ``speedup`` is the baseline's makespan over the row's, the baseline
being the model on the row's device at one stream on one card (a point of the grid, or
run silently, not as a row, when the grid lacks it); with ``verify`` every point
computes and ``verified`` says whether its outputs are bit-identical to the baseline's.
The rows are the same on every backend and with any number of workers, all but the
host seconds (``compile_s``, ``simulate_s``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from graphexec.errors import GraphExecError
from graphexec.sweep.grid import KEY, Point, find_models, grid
from graphexec.sweep.output import open_output
from graphexec.sweep.point import Job

BACKENDS = ("local", "ray")
Progress = Callable[[int, int, str], None]


def sweep(models: str | Path | Iterable[str | Path], device: Sequence[str] = ("ascend910",),
          streams: Sequence[int | str] = (1,), policy: Sequence[str | None] = (None,),
          devices: Sequence[int] = (1,), parallel: Sequence[str] = ("data",), *, batch: int | None = None,
          output: str | Path | None = None, backend: str = "local", workers: int | None = None,
          address: str | None = None, verify: bool = False, diagnose: bool = True,
          progress: Progress | None = None) -> list[dict[str, Any]]:
    """Run every point of the grid (skipping those already in ``output``) and return all
    its rows in grid order (see the module docstring and ``sweep_point.COLUMNS``)."""
    found = find_models([models] if isinstance(models, (str, Path)) else models)
    points = grid(list(found), list(device), list(streams), list(policy), list(devices), list(parallel))
    if backend not in BACKENDS:
        raise GraphExecError(f"backend must be one of {', '.join(map(repr, BACKENDS))}, not {backend!r}")
    if batch is not None and (isinstance(batch, bool) or not isinstance(batch, int) or batch < 1):
        raise GraphExecError(f"batch must be an int >= 1, not {batch!r}")
    runner = _backend(backend, workers, address)   # checked (Ray imported and started) before --output is made
    out = None
    try:
        out = open_output(output) if output is not None else None
        # a row counts as done only for the batch it was run at (a rerun at another batch is new work)
        rows = {_key(r): r for r in (out.rows if out is not None else []) if r.get("batch") == batch}
        todo = [Job(p, batch, verify, diagnose) for p in points if p.key not in rows]
        bases = {(p.model, p.device): baseline(points, p) for p in points}
        done = len(points) - len(todo)
        if progress is not None:
            progress(done, len(points), todo[0].point.describe() if todo else "")
        jobs = with_baselines(todo, bases, rows)
        silent: dict[tuple[str, ...], dict[str, Any]] = {}   # baselines the grid lacks: not rows
        keys = {p.key for p in points}
        for row, job in zip(runner.rows(found, jobs) if jobs else iter(()), jobs):
            row["batch"] = batch
            if job.point.key not in keys:
                silent[job.point.key] = row
                _finish(row, job.point, job.point, silent, verify)
                continue
            _finish(row, job.point, bases[job.point.model, job.point.device], rows | silent, verify)
            rows[job.point.key] = row
            if out is not None:
                out.append(row)
            done += 1
            if progress is not None:
                progress(done, len(points), job.point.describe())
    finally:
        if out is not None:
            out.close()
        getattr(runner, "close", lambda: None)()
    return [rows[p.key] for p in points]


def _backend(name: str, workers: int | None, address: str | None) -> Any:
    if name == "ray":
        from graphexec.sweep.ray_backend import RayBackend

        return RayBackend(address)
    from graphexec.sweep.local import LocalBackend

    return LocalBackend(workers)


def baseline(points: Sequence[Point], p: Point) -> Point:
    """The point every speedup of ``p``'s model on ``p``'s device is over: one stream on one
    card (the grid's own such point if it has one, else one to run silently)."""
    own = [q for q in points if (q.model, q.device, q.streams, q.devices) == (p.model, p.device, "1", 1)]
    return own[0] if own else Point(p.model, p.device, "1", "", 1, "")


def with_baselines(todo: list[Job], bases: Mapping[tuple[str, str], Point],
                   rows: Mapping[tuple[str, ...], Any]) -> list[Job]:
    """``todo`` with each baseline that is not done run before the first point that needs it
    (moved up when the grid has it later, added silently when it lacks it): rows come back
    in order, so the baseline's is there when a speedup needs it."""
    pending = {j.point.key: j for j in todo}
    placed: set[tuple[str, ...]] = set(rows)
    out: list[Job] = []
    for job in todo:
        base = bases[job.point.model, job.point.device]
        for j in (pending.get(base.key) or Job(base, job.batch, job.verify, diagnose=False), job):
            if j.point.key not in placed:
                placed.add(j.point.key)
                out.append(j)
    return out


def _key(row: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(str(row[c]) for c in KEY)


def _finish(row: dict[str, Any], point: Point, first: Point, rows: dict[tuple[str, ...], dict[str, Any]],
            verify: bool) -> None:
    """Fill the columns that need the baseline (``first``): speedup, verified."""
    base = row if first == point else rows.get(first.key)
    if base is None:
        return
    if base["makespan_us"] and row["makespan_us"]:
        row["speedup"] = float(base["makespan_us"]) / float(row["makespan_us"])
    if verify and base["outputs_sha256"] and row["outputs_sha256"]:
        row["verified"] = "yes" if row["outputs_sha256"] == base["outputs_sha256"] else "no: outputs differ"
