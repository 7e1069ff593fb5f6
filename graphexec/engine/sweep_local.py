"""The local backend: a sweep's points on a process pool over this machine's cores (or in
this process with one worker). Each worker loads a model once and keeps it for the
model's other points; rows come back in the points' order, whatever order they finish
in. A worker that dies (the pool breaks) costs a fresh pool and the unfinished points
are run again; a point that breaks two pools is a row with that error."""

from __future__ import annotations

import os
import signal
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

from graphexec.engine.sweep_point import Job, empty_row, run_point
from graphexec.errors import GraphExecError
from graphexec.frontend import load
from graphexec.ir import Graph

RETRIES = 2   # pools a point may break before it is given up as a row with its error

_GRAPHS: dict[str, Graph] = {}   # this worker's loaded models, by path


def load_cached(path: str) -> Graph:
    graph = _GRAPHS.get(path)
    if graph is None:
        graph = _GRAPHS[path] = load(path)
    return graph


def work(path: str, job: Job) -> dict[str, Any]:
    """A point's row, in whatever process runs it (a model that fails to load is the
    row's error too)."""
    try:
        graph = load_cached(path)
    except GraphExecError as e:
        row = empty_row(job.point)
        row["error"] = str(e).splitlines()[0]
        return row
    return run_point(graph, job)


def _ignore_sigint() -> None:
    """Pool workers leave Ctrl-C to the sweep's own process, which stops the pool."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


class LocalBackend:
    """``workers`` processes (None: one per core; 1: this process, no pool)."""

    def __init__(self, workers: int | None = None) -> None:
        if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
            raise GraphExecError(f"workers must be an int >= 1, not {workers!r}")
        self.workers = workers or os.cpu_count() or 1

    def rows(self, models: Mapping[str, Path], jobs: Sequence[Job]) -> Iterator[dict[str, Any]]:
        if self.workers == 1:
            for job in jobs:
                yield work(str(models[job.point.model]), job)
            return
        pending, broke = list(jobs), 0   # broke: pools lost in a row at the first unfinished point
        while pending:
            pool = ProcessPoolExecutor(min(self.workers, len(pending)), initializer=_ignore_sigint)
            try:
                futures = [pool.submit(work, str(models[j.point.model]), j) for j in pending]
                done = 0
                for row in self._collect(futures):
                    if row is None:
                        break
                    broke, done = 0, done + 1
                    yield row
                if done < len(pending):   # the pool broke at pending[done]: rerun from there on a new one
                    broke += 1
                    if broke > RETRIES:
                        yield _lost(pending[done])
                        done, broke = done + 1, 0
                pending = pending[done:]
            finally:
                pool.shutdown(wait=False, cancel_futures=True)

    @staticmethod
    def _collect(futures: list[Future]) -> Iterator[dict[str, Any] | None]:
        """The futures' rows in order; None once the pool broke."""
        for f in futures:
            try:
                yield f.result()
            except BrokenProcessPool:
                yield None
                return


def _lost(job: Job) -> dict[str, Any]:
    row = empty_row(job.point)
    row["error"] = f"internal error: the worker process died running this point ({RETRIES + 1} times)"
    return row
