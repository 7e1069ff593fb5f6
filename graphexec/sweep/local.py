"""The local backend: a sweep's points on a process pool over this machine's cores (or in
this process with one worker). Each worker loads a model once and keeps it for the
model's other points; rows come back in the points' order, whatever order they finish
in. A worker that dies (the pool breaks) costs a fresh pool: the first unfinished point
runs alone in a pool of its own (so a point is blamed only for its own worker's death),
and is a row with that error if its worker dies every time; the rest go back to a pool."""

from __future__ import annotations

import os
import signal
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

from graphexec.errors import GraphExecError
from graphexec.frontend import load
from graphexec.ir import Graph
from graphexec.sweep.point import Job, empty_row, error_line, run_point

RETRIES = 2   # reruns alone of a point whose worker died, before it is a row with that error

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
    except Exception as e:   # a sweep never crashes on one model
        row = empty_row(job.point)
        row["error"] = error_line(e)
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
        pending, suspect = list(jobs), False
        while pending:
            if suspect:   # a pool broke with pending[0] unfinished: alone, it is blamed only if it is the killer
                yield self._alone(models, pending[0])
                pending, suspect = pending[1:], False
                continue
            pool = ProcessPoolExecutor(min(self.workers, len(pending)), initializer=_ignore_sigint)
            try:
                futures = self._submit(pool, models, pending)
                done = 0
                for row in self._collect(futures):
                    if row is None:
                        break
                    done += 1
                    yield row
                pending, suspect = pending[done:], done < len(pending)
            finally:
                pool.shutdown(wait=False, cancel_futures=True)

    @staticmethod
    def _submit(pool: ProcessPoolExecutor, models: Mapping[str, Path], jobs: Sequence[Job]) -> list[Future]:
        """Futures of ``jobs``; fewer when the pool breaks while they are handed in (a worker
        that dies at once): those given report the break, the rest are run again."""
        futures: list[Future] = []
        try:
            for j in jobs:
                futures.append(pool.submit(work, str(models[j.point.model]), j))
        except BrokenProcessPool:
            pass
        return futures

    @staticmethod
    def _alone(models: Mapping[str, Path], job: Job) -> dict[str, Any]:
        """``job``'s row from a pool of its own, retried while its worker dies."""
        for _ in range(RETRIES + 1):
            pool = ProcessPoolExecutor(1, initializer=_ignore_sigint)
            try:
                return pool.submit(work, str(models[job.point.model]), job).result()
            except BrokenProcessPool:
                continue
            finally:
                pool.shutdown(wait=False, cancel_futures=True)
        return _lost(job)

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
