"""``npu.profiler``: torch_npu's profiler API over the emulated cards.

Two forms. torch_npu's, with steps::

    with npu.profiler.profile(activities=[npu.profiler.ProfilerActivity.CPU, npu.profiler.ProfilerActivity.NPU],
                              schedule=npu.profiler.schedule(wait=1, warmup=1, active=3, repeat=1),
                              on_trace_ready=npu.profiler.tensorboard_trace_handler("./result"),
                              record_shapes=True, profile_memory=True) as prof:
        for step in range(steps):
            train_one_step()
            prof.step()

writes ``./result/<host>_<pid>_<timestamp>_ascend_pt/ASCEND_PROFILER_OUTPUT/`` at the end of
each active cycle (``profiling/ascend_pt.py``: trace_view.json, kernel_details.csv,
operator_details.csv, op_statistic.csv, step_trace_time.csv, api_statistic.csv; with
profile_memory memory_record.csv and operator_memory.csv; with collectives
communication.json and communication_matrix.json). The
schedule is torch's (``schedule``); steps are numbered from 0 and each recorded step is a
``ProfilerStep#N`` with its stats and its diagnosis measured by replay. It records what ran
in the steps: eager cards' ops, ACL devices' launches (collectives included) and Session
runs, every card of them (``_prof_steps.py``, ``_prof_export.py``). With no schedule every
step from start to stop is recorded; ``with_stack`` keeps the Python frames that launched
each op (operator_details.csv's Call Stack).

And graphexec's older ``with npu.profiler.profile(output_dir):``, kept: the block's work
(eager cards, sessions and ACL devices alike) goes into one ``PROF_*`` folder in msprof's
layout under ``output_dir`` (``profiling/env.py``); each eager card's run carries its stats
and diagnosis; the cards of one block are one step.
"""

from __future__ import annotations

import os
import socket
import time
from enum import Enum
from pathlib import Path
from types import SimpleNamespace, TracebackType
from typing import Any, Callable, Iterable

from graphexec.errors import GraphExecError
from graphexec.npu._prof_export import blocks, saved_runs
from graphexec.npu._prof_memory import AllocLog
from graphexec.npu._prof_stats import EagerStats, eager_stats
from graphexec.npu._prof_steps import Recorder, Taken
from graphexec.npu._state import STATE
from graphexec.npu._tensor import MEMORY_HOOKS
from graphexec.profiling import env
from graphexec.profiling.ascend_pt import write_ascend_pt
from graphexec.profiling.record import DeviceRun

__all__ = ["EagerStats", "ProfilerAction", "ProfilerActivity", "eager_stats", "profile", "schedule",
           "tensorboard_trace_handler"]


class ProfilerActivity(Enum):
    """What to profile (torch_npu's names): both are the eager cards' work here."""

    CPU = "CPU"
    NPU = "NPU"


class ProfilerAction(Enum):
    """What the profiler does in a step (torch.profiler's)."""

    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3


def schedule(*, wait: int, warmup: int, active: int, repeat: int = 0, skip_first: int = 0
             ) -> Callable[[int], ProfilerAction]:
    """torch.profiler.schedule: skip ``skip_first`` steps, then cycles of ``wait`` idle,
    ``warmup`` and ``active`` recorded steps (the last saves), ``repeat`` times (0: forever)."""
    for name, v in (("wait", wait), ("warmup", warmup), ("repeat", repeat), ("skip_first", skip_first)):
        if not isinstance(v, int) or v < 0:
            raise GraphExecError(f"profiler.schedule: {name} must be an int >= 0, got {v!r}")
    if not isinstance(active, int) or active < 1:
        raise GraphExecError(f"profiler.schedule: active must be an int >= 1, got {active!r}")
    cycle = wait + warmup + active

    def action(step: int) -> ProfilerAction:
        if step < skip_first:
            return ProfilerAction.NONE
        step -= skip_first
        if repeat and step >= repeat * cycle:
            return ProfilerAction.NONE
        at = step % cycle
        if at < wait:
            return ProfilerAction.NONE
        if at < wait + warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if at < cycle - 1 else ProfilerAction.RECORD_AND_SAVE

    return action


def tensorboard_trace_handler(dir_name: str | os.PathLike[str], worker_name: str | None = None,
                              analyse_flag: bool = True) -> Callable[["profile"], None]:
    """The ``on_trace_ready`` that writes a ``<worker>_<timestamp>_ascend_pt`` folder under
    ``dir_name`` (worker: ``<hostname>_<pid>`` unless named)."""
    def handler(prof: "profile") -> None:
        prof.export_ascend_pt(dir_name, worker_name)

    return handler


RECORDING = (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE)


class profile:
    """torch_npu.profiler.profile (keyword arguments), or ``profile(output_dir)`` (msprof's
    PROF folder of the block); ``.path`` is the last folder written."""

    def __init__(self, output_dir: str | os.PathLike[str] | None = None, *,
                 activities: Iterable[ProfilerActivity] | None = None,
                 schedule: Callable[[int], ProfilerAction] | None = None,
                 on_trace_ready: Callable[["profile"], None] | None = None, record_shapes: bool = False,
                 profile_memory: bool = False, with_stack: bool = False, with_flops: bool = False,
                 with_modules: bool = False, experimental_config: Any = None) -> None:
        if output_dir is not None and (schedule is not None or on_trace_ready is not None):
            raise GraphExecError("profiler.profile: give an output folder (msprof's PROF layout) or "
                                 "schedule/on_trace_ready (torch_npu's), not both")
        self.output_dir = output_dir
        self.path: Path | None = None
        self.paths: list[Path] = []
        self.step_num = 0
        self.activities = list(activities) if activities is not None else list(ProfilerActivity)
        self.schedule = schedule
        self.on_trace_ready = on_trace_ready
        self.config = {"record_shapes": bool(record_shapes), "profile_memory": bool(profile_memory),
                       "with_stack": bool(with_stack), "with_flops": bool(with_flops),
                       "with_modules": bool(with_modules), "activities": [a.value for a in self.activities]}
        self._legacy = _Legacy() if output_dir is not None else None
        self._recorder = Recorder(memory=bool(profile_memory), stack=bool(with_stack))
        self._action = ProfilerAction.NONE
        self._saved: Taken | None = None

    # ---- torch's calls --------------------------------------------------------------
    def start(self) -> None:
        if self._legacy is not None:
            self._legacy.start(self.output_dir)
            return
        self._recorder.start()
        self._enter(self._action_at(self.step_num))

    def stop(self) -> None:
        if self._legacy is not None:
            self.path = self._legacy.stop(True)
            return
        try:
            if self._action in RECORDING:
                self._recorder.end()
                self._save()
        finally:
            self._recorder.stop()

    def step(self) -> None:
        """The end of one step and the start of the next, as the schedule says."""
        if self._legacy is not None:
            raise GraphExecError("profiler.profile(output_dir) has no steps: give schedule= and on_trace_ready=")
        if self._action in RECORDING:
            self._recorder.end()
            if self._action is ProfilerAction.RECORD_AND_SAVE:
                self._save()
        self.step_num += 1
        self._enter(self._action_at(self.step_num))

    def __enter__(self) -> "profile":
        self.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if kind is None:
            self.stop()
        elif self._legacy is not None:
            self.path = self._legacy.stop(False)
        else:
            self._recorder.stop()

    # ---- what was recorded ------------------------------------------------------------
    def _action_at(self, step: int) -> ProfilerAction:
        return self.schedule(step) if self.schedule is not None else ProfilerAction.RECORD

    def _enter(self, action: ProfilerAction) -> None:
        self._action = action
        if action in RECORDING:
            self._recorder.begin(self.step_num)

    def _save(self) -> None:
        """The steps recorded since the last save, ready for ``on_trace_ready``."""
        self._saved = self._recorder.take()
        if (self._saved.runs or self._saved.results) and self.on_trace_ready is not None:
            self.on_trace_ready(self)
        self._recorder.forget_stacks()

    def export_ascend_pt(self, dir_name: str | os.PathLike[str], worker_name: str | None = None) -> Path | None:
        """Write the steps of the cycle just saved as torch_npu's folder (``tensorboard_trace_handler``)."""
        taken = self._saved
        if taken is None or not (taken.runs or taken.results):
            return None
        runs, extras = saved_runs(taken)
        worker = worker_name or f"{socket.gethostname()}_{os.getpid()}"
        stamp = time.strftime("%Y%m%d%H%M%S") + f"{int(time.time() * 1000) % 1000:03d}"
        stacks = {id(t): self._recorder.stack_of(t) for run in runs for t in run.tasks} if self.config["with_stack"] \
            else None
        memory = (taken.memory, blocks(taken)) if self.config["profile_memory"] else None
        self.path = write_ascend_pt(dir_name, worker, stamp, runs, extras, memory, self.config, stacks)
        self.paths.append(self.path)
        return self.path

    def export_chrome_trace(self, path: str | os.PathLike[str]) -> None:
        """The cycle just saved as one Chrome trace file (its trace_view.json)."""
        import shutil
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            folder = self.export_ascend_pt(tmp, "trace")
            if folder is None:
                raise GraphExecError("profiler: no recorded step to export")
            shutil.copyfile(folder / "ASCEND_PROFILER_OUTPUT" / "trace_view.json", path)
            self.paths.pop()


class _Legacy:
    """``profile(output_dir)``: the block's work as one PROF folder (``profiling/env.py``)."""

    def __init__(self) -> None:
        self._marks: dict[int, tuple[int, int, float]] = {}
        self._collector: env.Collector | None = None
        self._alloc = AllocLog()

    def start(self, output_dir: Any) -> None:
        for i, card in STATE.cards.items():
            dev = card.device
            dev.synchronize_device()
            self._marks[i] = (len(dev.sim.finished), len(dev.launches), dev.sim.now)
        self._collector = env.start(output_dir)
        MEMORY_HOOKS.append(self._alloc.hook)   # which op took each block: the report's memory section

    def stop(self, keep: bool) -> Path | None:
        c = self._collector
        assert c is not None
        if self._alloc.hook in MEMORY_HOOKS:
            MEMORY_HOOKS.remove(self._alloc.hook)
        try:
            if keep:
                first = len(c.runs)
                for i, card in sorted(STATE.cards.items()):
                    run = self._window(i, card.device)
                    if run is not None:
                        c.seen.add(id(card.device.sim))
                        if len(c.runs) > first:
                            c.groups[len(c.runs)] = first
                        c.runs.append((run, eager_stats(run)))
        finally:
            path = env.stop(c)
        return path

    def _window(self, index: int, dev: Any) -> DeviceRun | None:
        """What ``dev`` ran since the block began, as a run with no plan behind it."""
        dev.synchronize_device()
        done, launched, t0 = self._marks.get(index, (0, 0, 0.0))
        tasks = dev.sim.finished[done:]
        if not tasks:
            return None
        sim = SimpleNamespace(streams=dev.sim.streams, finished=tasks,
                              samples=[s for s in dev.sim.samples if s[0] >= t0])
        return DeviceRun(tasks, dev.launches[launched:], sim, dev.profile, dev.id, False, "eager",
                         memory=self._alloc.of_card(index, dev.launches, launched))

