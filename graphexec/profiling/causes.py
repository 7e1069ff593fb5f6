"""Counterfactuals: what removing each cause of a slow run would buy, measured.

These say what bounds a run; most change the device, not a setting (twice the bandwidth,
no per-task overhead), so they are explanations, not advice: the advice is
``actions.py``'s, settings the user can change, each measured the same way.

graphexec owns the simulator, so a cause is not guessed from ratios: the run's own
tasks are simulated again, timing only, on a device from which that one cause has been
taken away, and the cause's ``gain`` is the speedup that buys over the run as it was:

- dependency: the best multi-stream schedule (every policy at 2, 4 and 8 streams, as
  ``streams="auto"`` searches);
- launch: graph mode and no host launch cost (the task list loaded with the model);
- dispatch: no device-side per-task overhead (what fusing or bigger kernels can buy);
- memory: twice the HBM bandwidth; compute: twice the cube and vector peak;
- host: the host never blocks on a full command queue (queue depth unbounded).

Device profiles are frozen pydantic models, so each counterfactual is a modified copy
(``model_copy``) and schedules are values: nothing of the compiled plan changes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from graphexec.passes.stream_assignment import build_schedule
from graphexec.passes.stream_policies import POLICIES, reduced_edges
from graphexec.plan import Plan
from graphexec.runtime.launch import simulate_makespan

WHAT_IF_LIMITS = (2, 4, 8)
UNBOUNDED = 1 << 40
# graph mode takes away what an unbounded queue does (no command queue fills) and the
# launch cost besides: when the two buy the same (within TIE) the narrower change is named
WITHIN = {"host": "launch"}
TIE = 0.05


@dataclass(frozen=True)
class Experiment:
    """One counterfactual's simulated makespan (and, for dependency, the schedule's streams and policy)."""

    reason: str
    makespan_us: float
    streams: int | None = None
    policy: str | None = None


def _twice_peak(profile: Any) -> Any:
    peak = profile.peak_tflops
    doubled = peak.model_copy(update={"cube": {k: 2 * v for k, v in peak.cube.items()},
                                      "vector": {k: 2 * v for k, v in peak.vector.items()}})
    aicpu = 2 * profile.aicpu_gflops_per_core
    return profile.model_copy(update={"peak_tflops": doubled, "aicpu_gflops_per_core": aicpu})


PROFILES: dict[str, Callable[[Any], Any]] = {
    "dispatch": lambda p: p.model_copy(update={"task_overhead_us": 0.0}),
    "memory": lambda p: p.model_copy(update={"hbm_bandwidth_gbps": 2 * p.hbm_bandwidth_gbps}),
    "compute": _twice_peak,
    "host": lambda p: p.model_copy(update={"queue_depth": UNBOUNDED, "max_tasks_per_stream": UNBOUNDED}),
}


def best_streams(plan: Plan, graph_mode: bool, base: float) -> Experiment:
    """The fastest schedule of the same tasks over more streams (timing only)."""
    tasks, profile = plan.tasks, plan.profile
    best = Experiment("dependency", base, len(plan.schedule.streams), plan.schedule.policy)
    if _total_order(tasks):   # every task follows the one before: no schedule overlaps anything
        return best
    for n in (n for n in WHAT_IF_LIMITS if n <= profile.max_streams):
        for policy in (p for p in POLICIES if p != "single"):
            sched = build_schedule(tasks, policy, n, profile)
            span = simulate_makespan(sched, profile, graph_mode)
            if span < best.makespan_us * (1 - 1e-9):
                best = Experiment("dependency", span, len(sched.streams), policy)
    return best


def _total_order(tasks: Any) -> bool:
    """Whether the task DAG is one chain (its reduction a single path through every task)."""
    edges = reduced_edges(tasks)
    n = len(tasks.tasks)
    return len(edges) == n - 1 and len({p for p, _ in edges}) == n - 1 and len({c for _, c in edges}) == n - 1


def experiments(plan: Plan, graph_mode: bool) -> tuple[float, dict[str, Experiment]]:
    """(the as-run makespan re-simulated, each cause's counterfactual), from the plan alone."""
    sched, profile = plan.schedule, plan.profile
    base = simulate_makespan(sched, profile, graph_mode)
    out = {"dependency": best_streams(plan, graph_mode, base),
           "launch": Experiment("launch", simulate_makespan(sched, profile.model_copy(update={"launch_cost_us": 0.0}),
                                                            True))}
    for reason, change in PROFILES.items():
        out[reason] = Experiment(reason, simulate_makespan(sched, change(profile), graph_mode))
    return base, out


def gain(base: float, exp: Experiment) -> float:
    """Speedup of the counterfactual over the run (1.0 when both are empty)."""
    return base / exp.makespan_us if exp.makespan_us > 0 else 1.0


def ranked(gains: dict[str, float]) -> list[str]:
    """Reasons best first by gain; a cause whose counterfactual lies within a broader one's
    (``WITHIN``) and buys nearly as much (within ``TIE``) goes just before it."""
    out = sorted(gains, key=lambda r: (-gains[r], r))
    for narrow, broad in WITHIN.items():
        if narrow in out and broad in out and out.index(broad) < out.index(narrow) \
                and gains[broad] <= gains[narrow] * (1 + TIE):
            out.remove(narrow)
            out.insert(out.index(broad), narrow)
    return out
