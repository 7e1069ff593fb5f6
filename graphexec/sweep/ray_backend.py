"""The Ray backend: a sweep's points as Ray tasks on a cluster (``address``; None: the one
this process is connected to, else a local one started for the sweep).

Each model is loaded here once and put in the object store (``ray.put``); a task gets the
reference inside a list, so Ray does not fetch it per task, and a worker fetches a model
once and keeps it for that model's other points. Rows are taken back in the points'
order as they finish. Ray reruns a task whose worker died (``max_retries``); a task that
still fails is submitted again up to ``RETRIES`` times, then is a row with its error.
Ray is an optional extra: ``pip install -e ".[cluster]"``.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

from graphexec.errors import GraphExecError
from graphexec.ir import Graph
from graphexec.sweep.local import load_cached
from graphexec.sweep.point import Job, empty_row, error_line, first_line, run_point

RETRIES = 2
_GRAPHS: dict[str, Graph] = {}   # this worker's models, by object reference


def _ray() -> Any:
    try:
        import ray
    except ImportError as e:
        raise GraphExecError("--backend ray needs ray: pip install -e '.[cluster]' (or pip install ray)") from e
    return ray


def ray_work(box: list[Any], job: Job) -> dict[str, Any]:
    """A point's row on a Ray worker; ``box`` holds the model's object reference."""
    ray = _ray()
    ref = box[0]
    graph = _GRAPHS.get(ref.hex())
    if graph is None:
        graph = _GRAPHS[ref.hex()] = ray.get(ref)
    return run_point(graph, job)


class RayBackend:
    """Points as Ray tasks; ``address`` as ``ray.init`` takes it."""

    def __init__(self, address: str | None = None) -> None:
        self.ray = _ray()
        self.started = False
        if not self.ray.is_initialized():
            try:
                self.ray.init(address=address, include_dashboard=False, log_to_driver=False,
                              logging_level=logging.ERROR)   # the sweep's line is the one line on failure
            except Exception as e:   # noqa: BLE001  (whatever stops Ray starting: a socket path too long, a memory cap)
                where = f"at {address}" if address else "locally"
                raise GraphExecError(f"cannot start or reach a Ray cluster {where}: {type(e).__name__}: "
                                     f"{first_line(str(e))}") from e
            self.started = True
        self.task = self.ray.remote(max_retries=3)(ray_work)

    def rows(self, models: Mapping[str, Path], jobs: Sequence[Job]) -> Iterator[dict[str, Any]]:
        boxes: dict[str, list[Any] | str] = {}
        for job in jobs:   # each model loaded and shipped once
            name = job.point.model
            if name not in boxes:
                try:
                    boxes[name] = [self.ray.put(load_cached(str(models[name])))]
                except Exception as e:   # a sweep never crashes on one model
                    boxes[name] = error_line(e)
        refs = [None if isinstance(boxes[j.point.model], str) else self.task.remote(boxes[j.point.model], j)
                for j in jobs]
        taken = 0
        try:
            for job, ref in zip(jobs, refs):
                box = boxes[job.point.model]
                yield self._get(ref, box, job) if not isinstance(box, str) else _failed(job, box)
                taken += 1
        finally:
            for ref in refs[taken + 1:]:   # interrupted: the points not taken back are not wanted
                if ref is not None:
                    self.ray.cancel(ref)
            self.close()

    def close(self) -> None:
        """Stop the Ray this backend started (rows do when they end; a sweep with nothing
        left to run never asks for them)."""
        if self.started and self.ray.is_initialized():
            self.ray.shutdown()
        self.started = False

    def _get(self, ref: Any, box: list[Any], job: Job) -> dict[str, Any]:
        """The task's row; one whose worker or node was lost is submitted again."""
        for attempt in range(RETRIES + 1):
            try:
                return self.ray.get(ref)
            except self.ray.exceptions.RayError as e:
                if attempt == RETRIES:
                    return _failed(job, f"internal error: the Ray task failed {RETRIES + 1} times: "
                                        f"{first_line(str(e))}")
                ref = self.task.remote(box, job)
        raise AssertionError("unreachable")


def _failed(job: Job, error: str) -> dict[str, Any]:
    row = empty_row(job.point)
    row["error"] = error
    return row
