"""Lower bounds on the makespan: what no schedule on this device can beat."""

from __future__ import annotations

from dataclasses import replace

from graphexec.passes.base import CompileState, Pass, PassResult
from graphexec.plan import Bounds
from graphexec.plan.tasks import Task, TaskGraph
from graphexec.runtime.profiles import DeviceProfile


def fastest_us(task: Task, profile: DeviceProfile) -> float:
    """A task's time with every core of its unit and all of HBM to itself."""
    cores, rate = profile.unit_cores(task.unit), profile.unit_rate(task.unit, task.dtype)
    if task.unit == "aicpu":
        return profile.task_overhead_us + task.flops / (rate * min(task.block_dim, cores))
    waves = -(-max(1, task.block_dim) // cores)
    compute = task.flops / max(1, task.block_dim) / rate * waves
    return profile.task_overhead_us + max(compute, task.bytes / profile.hbm_bytes_per_us)


def fastest_all(tasks: list[Task], profile: DeviceProfile) -> list[float]:
    """``fastest_us`` of each task, in order: the same arithmetic, with the profile's cores
    and rate looked up once per (unit, dtype) instead of once per task."""
    speeds: dict[tuple[str, str], tuple[int, float]] = {}
    over, hbm = profile.task_overhead_us, profile.hbm_bytes_per_us
    out = []
    for task in tasks:
        key = (task.unit, task.dtype)
        cores, rate = speeds.get(key) or speeds.setdefault(key, (profile.unit_cores(task.unit),
                                                                 profile.unit_rate(task.unit, task.dtype)))
        if task.unit == "aicpu":
            out.append(over + task.flops / (rate * min(task.block_dim, cores)))
            continue
        waves = -(-max(1, task.block_dim) // cores)
        compute = task.flops / max(1, task.block_dim) / rate * waves
        out.append(over + max(compute, task.bytes / hbm))
    return out


def lower_bound_us(tasks: TaskGraph, profile: DeviceProfile) -> Bounds:
    """The bounds for the kernel tasks of ``tasks``."""
    finish: dict[int, float] = {}
    core_time = {"cube": 0.0, "vector": 0.0}
    total_bytes = 0.0
    rates: dict[tuple[str, str], float] = {}
    for t, d in zip(tasks.tasks, fastest_all(tasks.tasks, profile)):  # tasks are in topological order
        deps = tasks.deps.get(t.id)
        finish[t.id] = d + max((finish[p] for p in deps), default=0.0) if deps else d + 0.0
        if t.unit in core_time:
            key = (t.unit, t.dtype)
            rate = rates.get(key) or rates.setdefault(key, profile.unit_rate(t.unit, t.dtype))
            core_time[t.unit] += t.flops / rate
        total_bytes += t.bytes
    cp = max(finish.values(), default=0.0)
    if profile.coupled:
        by_cores = (core_time["cube"] + core_time["vector"]) / profile.ai_cores
    else:
        by_cores = max(core_time["cube"] / profile.ai_cores, core_time["vector"] / profile.vector_cores)
    return Bounds(max(cp, by_cores, total_bytes / profile.hbm_bytes_per_us), cp)


class MakespanBounds(Pass):
    """The makespan's lower bound and critical path, for the stats of every run."""

    name = "bounds"

    def call(self, state: CompileState) -> PassResult:
        return PassResult(replace(state, bounds=lower_bound_us(state.need_tasks(), state.profile)), True)
