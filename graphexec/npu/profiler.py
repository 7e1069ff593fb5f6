"""``with npu.profiler.profile(output_dir):`` profiles the eager work of the block.

The block is profiled by graphexec's own collector (``graphexec.profiling.env``, what
``ASCEND_PROFILING_ENABLED`` and ``graphexec run --profile`` use): on exit every card
that eager mode opened is synchronized and the tasks it ran during the block (kernels,
copies, events, with the host's launches) go into one ``PROF_*`` folder in msprof's
layout under ``output_dir``, beside the runs of sessions and ACL devices made meanwhile.
Each card's run carries its stats (``EagerStats``: the Stats fields a run with no plan
has) and so its diagnosis (``profiling/replay_causes.py``); the cards of one block are
one step.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path
from types import SimpleNamespace, TracebackType
from typing import Any

from graphexec.engine.metrics import scan
from graphexec.npu._state import STATE
from graphexec.profiling import env
from graphexec.profiling.counters import run_metrics
from graphexec.profiling.record import DeviceRun


@dataclass(frozen=True)
class EagerStats:
    """The numbers of one card's eager work (``Stats``' fields that need no plan)."""

    makespan_us: float
    num_tasks: int
    num_kernels: int
    num_aicpu: int
    num_streams: int
    num_events: int
    cube_utilization: float
    vector_utilization: float
    hbm_utilization: float
    mean_queue_depth: float
    max_queue_depth: int
    device_idle_us: float
    host_wait_us: float
    host_time_us: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def eager_stats(run: DeviceRun) -> EagerStats:
    """The stats of ``run`` from its finished tasks and host launches."""
    done = [t for t in run.tasks if t.start_t is not None]
    seen = scan(done, run.profile)
    span = seen["hi"] - seen["lo"] if seen["hi"] >= seen["lo"] else 0.0
    host = max((lc.end for lc in run.launches), default=0.0) - min((lc.start for lc in run.launches), default=0.0)
    return EagerStats(span, len(done), seen["num_kernels"], seen["num_aicpu"], len({t.stream.id for t in done}),
                      sum(t.kind == "wait" for t in done), **seen["utilization"], **run_metrics(done),
                      host_time_us=host)


class profile:
    """Profile the block's eager work into a PROF folder under ``output_dir`` (``.path`` after)."""

    def __init__(self, output_dir: str | os.PathLike[str]) -> None:
        self.output_dir = output_dir
        self.path: Path | None = None
        self._marks: dict[int, tuple[int, int, float]] = {}
        self._collector: env.Collector | None = None

    def __enter__(self) -> profile:
        for i, card in STATE.cards.items():
            dev = card.device
            dev.synchronize_device()
            self._marks[i] = (len(dev.sim.finished), len(dev.launches), dev.sim.now)
        self._collector = env.start(self.output_dir)
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        c = self._collector
        assert c is not None
        try:
            if kind is None:
                first = len(c.runs)
                for i, card in sorted(STATE.cards.items()):
                    run = self._window(i, card.device)
                    if run is not None:
                        c.seen.add(id(card.device.sim))
                        if len(c.runs) > first:
                            c.groups[len(c.runs)] = first
                        c.runs.append((run, eager_stats(run)))
        finally:
            self.path = env.stop(c)

    def _window(self, index: int, dev: Any) -> DeviceRun | None:
        """What ``dev`` ran since the block began, as a run with no plan behind it."""
        dev.synchronize_device()
        done, launched, t0 = self._marks.get(index, (0, 0, 0.0))
        tasks = dev.sim.finished[done:]
        if not tasks:
            return None
        sim = SimpleNamespace(streams=dev.sim.streams, finished=tasks,
                              samples=[s for s in dev.sim.samples if s[0] >= t0])
        return DeviceRun(tasks, dev.launches[launched:], sim, dev.profile, dev.id, False, "eager")
