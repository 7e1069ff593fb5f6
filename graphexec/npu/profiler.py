"""``with npu.profiler.profile(output_dir):`` profiles the eager work of the block.

The block is profiled by graphexec's own collector (``graphexec.profiling.env``, what
``ASCEND_PROFILING_ENABLED`` and ``graphexec run --profile`` use): on exit every card
that eager mode opened is synchronized and the tasks it ran during the block (kernels,
copies, events, with the host's launches) go into one ``PROF_*`` folder in msprof's
layout under ``output_dir``, beside the runs of sessions and ACL devices made meanwhile.
"""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace, TracebackType
from typing import Any

from graphexec.npu._state import STATE
from graphexec.profiling import env
from graphexec.profiling.record import DeviceRun


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
                for i, card in sorted(STATE.cards.items()):
                    run = self._window(i, card.device)
                    if run is not None:
                        c.seen.add(id(card.device.sim))
                        c.runs.append((run, None))
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
