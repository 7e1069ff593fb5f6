"""Replay: a compiled graph's device timeline is simulated once, then replayed.

What the simulator decides (when each task starts and ends, on which cores) depends on
the task list, the costs and the host clock at launch, never on the numbers the kernels
compute. So after one simulated run of a compiled plan, a later run whose launch starts
at the same host time would make the very same decisions: it only has to call the
kernels' starts (read, compute) and ends (store) in the recorded order, and it reuses
the recorded finished tasks for stats, trace and profile. Like a CUDA graph or GE's
loaded model, the schedule is fixed at load and the run only moves data.

Runs with the hazard checker on always simulate (the checker watches the simulation).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, replace
from typing import Any

from graphexec.engine.executor import ExecContext, KernelCall
from graphexec.passes.tasks import Task, TaskKind


@dataclass
class Tape:
    """One simulated run: the order of kernel starts and ends, and what the device kept.

    ``steps`` holds ``i`` for the start of kernel ``i`` (launch order) and ``~i`` for its end.
    """

    host_start: float          # the host clock when the first task was launched
    steps: list[int]
    sim: Any                   # the finished simulator of that run
    launches: list[Any]
    host_end: float            # the host clock after the device synchronized
    stats: Any = None          # the Stats of that run (all but host time carry over)

    def fits(self, device: Any) -> bool:
        """Whether a run on ``device`` as it stands now would simulate exactly this tape."""
        return device.checker is None and device.host_t == self.host_start

    def restore(self, device: Any) -> None:
        """Leave ``device`` as the simulated run left it (a private copy of the simulator,
        whose finished tasks are shared: nothing changes them once finished)."""
        device.sim = copy.copy(self.sim)
        device.launches = list(self.launches)
        device.host_t = self.host_end

    def stats_for(self, device: Any) -> Any:
        return replace(self.stats, host_time_us=float(device.host_t), extra={})


def kernel_tasks(order: list[Task]) -> list[Task]:
    """The kernel tasks in launch order (the indices the tape uses)."""
    return [t for t in order if t.kind in (TaskKind.KERNEL, TaskKind.AICPU)]


def replay(ctx: ExecContext, kernels: list[Task], steps: list[int]) -> None:
    """Run the kernels' starts and ends in the order of ``steps``."""
    calls = [KernelCall(ctx, t, i) for i, t in enumerate(kernels)]
    results: list[Any] = [None] * len(calls)
    for s in steps:
        if s >= 0:
            results[s] = calls[s].compute()
        else:
            calls[~s].store(results[~s])
            results[~s] = None
