"""Lower bounds on the makespan: what no schedule on this device can beat."""

from __future__ import annotations

from typing import Any

from graphexec.passes.tasks import Task, TaskGraph


def fastest_us(task: Task, profile: Any) -> float:
    """A task's time with every core of its unit and all of HBM to itself."""
    cores = profile.vector_cores if task.unit == "vector" and not profile.coupled else profile.ai_cores
    if task.unit == "aicpu":
        from graphexec.runtime.sim import AICPU_CORES, AICPU_FLOPS_PER_US

        cores = getattr(profile, "aicpu_cores", AICPU_CORES)
        return profile.task_overhead_us + task.flops / (AICPU_FLOPS_PER_US * min(task.block_dim, cores))
    per_core = (profile.cube_flops_per_us_per_core(_dtype(task)) if task.unit == "cube"
                else profile.vector_flops_per_us_per_core(_dtype(task)))
    waves = -(-max(1, task.block_dim) // cores)
    compute = task.flops / max(1, task.block_dim) / per_core * waves
    return profile.task_overhead_us + max(compute, task.bytes / profile.hbm_bytes_per_us)


def _dtype(task: Task) -> str:
    return task.dtype


def lower_bound_us(tasks: TaskGraph, profile: Any) -> tuple[float, float]:
    """(lower bound, critical path) for the kernel tasks of ``tasks``."""
    finish: dict[int, float] = {}
    core_time = {"cube": 0.0, "vector": 0.0}
    total_bytes = 0.0
    for t in tasks.tasks:  # tasks are in topological order
        d = fastest_us(t, profile)
        finish[t.id] = d + max((finish[p] for p in tasks.deps.get(t.id, ())), default=0.0)
        if t.unit in core_time:
            per_core = (profile.cube_flops_per_us_per_core(_dtype(t)) if t.unit == "cube"
                        else profile.vector_flops_per_us_per_core(_dtype(t)))
            core_time[t.unit] += t.flops / per_core
        total_bytes += t.bytes
    cp = max(finish.values(), default=0.0)
    if profile.coupled:
        by_cores = (core_time["cube"] + core_time["vector"]) / profile.ai_cores
    else:
        by_cores = max(core_time["cube"] / profile.ai_cores, core_time["vector"] / profile.vector_cores)
    return max(cp, by_cores, total_bytes / profile.hbm_bytes_per_us), cp
