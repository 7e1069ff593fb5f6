"""Why the cores are not full: the runtime article's three reasons, measured.

"If cube utilization is only 40%, the problem is usually in one of three places: memory
access, a dependency chain too long (use more streams), or operators so light that the
kernel launch overhead dominates." Each reason gets an estimate of the device time it
costs, in microseconds of the run:

- memory: busy time spent in kernels the roofline calls bandwidth-bound;
- launch: time the device waited on the host with every queue empty, plus the device's
  dispatch overhead of the kernels whose work is smaller than their fixed cost;
- dependency: the time more streams save, measured by re-running the same tasks under
  other stream counts in a timing-only simulation (the what-if).

When the cube or vector units run at half their peak or more the answer is "compute";
otherwise the largest estimate wins, and "compute" again when none reaches a tenth of
the run (the kernels are compute-bound but small, and the three remedies would not help).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from graphexec.passes.stream_assignment import build_schedule
from graphexec.passes.stream_policies import POLICIES
from graphexec.profiling.record import RunRecord
from graphexec.profiling.summary import op_rows
from graphexec.runtime.launch import simulate_makespan

BUSY = 0.5          # unit utilization at which the device counts as compute-bound
SIGNIFICANT = 0.1   # share of the run a reason must cost to be named
WHAT_IF_LIMITS = (2, 4, 8)
TOP = 5


@dataclass(frozen=True)
class Diagnosis:
    """The reason, the ops that matter (``{"name", "op", "us"}``, most to blame first),
    the numbers behind it, and for "dependency" the measured what-if speedup from more
    streams."""

    reason: str                       # "memory" | "dependency" | "launch" | "compute"
    message: str
    ops: list[dict[str, Any]]
    numbers: dict[str, float] = field(default_factory=dict)
    what_if_speedup: float | None = None
    what_if_streams: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def what_if(compiled: Any) -> tuple[float, float, int]:
    """(makespan as scheduled, best makespan over more streams, its stream count), both
    timing-only; schedules are values, so trying them changes nothing of the plan."""
    tasks, profile = compiled.tasks, compiled.profile
    graph_mode = compiled.device.graph_mode
    base = simulate_makespan(compiled.schedule, profile, graph_mode)
    best, best_n = base, len(compiled.schedule.streams)
    for n in (n for n in WHAT_IF_LIMITS if n <= profile.max_streams):
        for policy in (p for p in POLICIES if p != "single"):
            sched = build_schedule(tasks, policy, n, profile)
            span = simulate_makespan(sched, profile, graph_mode)
            if span < best * (1 - 1e-9):
                best, best_n = span, len(sched.streams)
    return base, best, best_n


def _by_bound(rows: list[dict[str, Any]]) -> dict[str, float]:
    time: dict[str, float] = {"compute": 0.0, "memory": 0.0, "overhead": 0.0}
    for r in rows:
        time[r["Bound"]] += r["Task Duration(us)"]
    return time


def _top(rows: list[dict[str, Any]], key: Any) -> list[dict[str, Any]]:
    return [{"name": r["Op Name"], "op": r["OP Type"], "us": r["Task Duration(us)"]}
            for r in sorted(rows, key=key, reverse=True)[:TOP]]


def _op_types(rows: list[dict[str, Any]]) -> str:
    counts = Counter(r["OP Type"] for r in rows)
    return ", ".join(f"{op} x{n}" for op, n in counts.most_common(3))


STAT_KEYS = ("makespan_us", "device_idle_us", "host_wait_us", "mean_queue_depth", "cube_utilization",
             "vector_utilization", "hbm_utilization")


def _kernel_numbers(rows: list[dict[str, Any]], profile: Any) -> dict[str, float]:
    """Shares of kernel time by roofline bound, and the fixed cost paid by light kernels."""
    time = _by_bound(rows)
    total = sum(time.values()) or 1.0
    light = [r for r in rows if r["Bound"] == "overhead"]
    fixed = sum(min(r["Task Duration(us)"], profile.task_overhead_us) for r in light)
    return {"kernels": len(rows), "overhead_bound_kernels": len(light), "fixed_share": fixed / total,
            **{f"{b}_bound_share": t / total for b, t in time.items()}}


def estimates(record: RunRecord, stats: Any) -> tuple[dict[str, float], list[dict[str, Any]]]:
    """The numbers behind the verdict, and the op_summary rows they came from."""
    rows = [r for r in op_rows(record) if r["Task Type"] != "MEMCPY_ASYNC"]
    n: dict[str, float] = {k: getattr(stats, k) for k in STAT_KEYS}
    n.update(_kernel_numbers(rows, record.profile), streams=stats.num_streams)
    base, best, best_n = what_if(record.compiled)
    speedup = base / best if best > 0 else 1.0
    n.update(what_if_base_us=base, what_if_best_us=best, what_if_speedup=speedup, what_if_streams=best_n)
    busy = n["busy_us"] = stats.makespan_us - stats.device_idle_us
    n["memory_us"] = busy * n["memory_bound_share"]
    n["dispatch_us"] = busy * n["fixed_share"]
    n["launch_us"] = stats.host_wait_us + n["dispatch_us"]
    n["dependency_us"] = stats.makespan_us * (1 - 1 / speedup) if speedup > 0 else 0.0
    return n, rows


def choose(n: dict[str, float]) -> str:
    """The verdict from the numbers (see the module docstring)."""
    if max(n["cube_utilization"], n["vector_utilization"]) >= BUSY:
        return "compute"
    costs = {r: n[f"{r}_us"] for r in ("memory", "launch", "dependency")}
    reason = max(costs, key=lambda r: costs[r])
    return reason if costs[reason] >= SIGNIFICANT * n["makespan_us"] else "compute"


def diagnose(record: RunRecord, stats: Any) -> Diagnosis:
    """Which reason holds for the run in ``record`` whose stats are ``stats``."""
    n, rows = estimates(record, stats)
    reason = choose(n)
    cores = record.profile.ai_cores
    pick = {"memory": lambda r: r["Bound"] == "memory", "launch": lambda r: r["Bound"] == "overhead",
            "compute": lambda r: r["Bound"] == "compute", "dependency": lambda r: True}[reason]
    chosen = [r for r in rows if pick(r)] or rows
    if reason == "dependency":   # the kernels that leave the most cores idle for the longest
        ops = _top(chosen, lambda r: (cores - min(cores, r["Block Dim"])) * r["Task Duration(us)"])
    else:
        ops = _top(chosen, lambda r: r["Task Duration(us)"])
    message = MESSAGES[reason](n, chosen, record.profile)
    streams = int(n["what_if_streams"]) if reason == "dependency" else None
    return Diagnosis(reason, message, ops, n, n["what_if_speedup"] if reason == "dependency" else None, streams)


def _memory(n: dict[str, float], rows: list[dict[str, Any]], profile: Any) -> str:
    return (f"memory-bound: {n['memory_bound_share']:.0%} of kernel time is in kernels limited by HBM bandwidth "
            f"({_op_types(rows)}); HBM ran at {n['hbm_utilization']:.0%} of peak, the cube at "
            f"{n['cube_utilization']:.0%}. Moving fewer bytes helps: fuse the elementwise chains, use float16, "
            f"keep tensors on chip.")


def _launch(n: dict[str, float], rows: list[dict[str, Any]], profile: Any) -> str:
    return (f"launch-bound: {int(n['overhead_bound_kernels'])} of {int(n['kernels'])} kernels ({_op_types(rows)}) "
            f"do less work than their fixed cost ({profile.launch_cost_us:g} us host launch, "
            f"{profile.task_overhead_us:g} us device dispatch). Of {n['makespan_us']:,.1f} us the device waited "
            f"{n['host_wait_us']:,.1f} us on the host (mean queue depth {n['mean_queue_depth']:.1f}) and spent "
            f"{n['dispatch_us']:,.1f} us dispatching these kernels. Fuse the small ops or launch the graph as one "
            f"(graph sink), so fewer, bigger kernels run.")


def _dependency(n: dict[str, float], rows: list[dict[str, Any]], profile: Any) -> str:
    return (f"dependency-bound: the cores idle while {int(n['streams'])} stream(s) run the tasks one after "
            f"another (cube at {n['cube_utilization']:.0%}, vector at {n['vector_utilization']:.0%}); re-run "
            f"timing-only on {int(n['what_if_streams'])} streams, the same tasks take {n['what_if_best_us']:,.1f} us "
            f"instead of {n['what_if_base_us']:,.1f} us ({n['what_if_speedup']:.2f}x). Run with --streams "
            f"{int(n['what_if_streams'])} or --streams auto.")


def _compute(n: dict[str, float], rows: list[dict[str, Any]], profile: Any) -> str:
    util = max(n["cube_utilization"], n["vector_utilization"])
    if util >= BUSY:
        return (f"compute-bound: the units are busy (cube {n['cube_utilization']:.0%}, vector "
                f"{n['vector_utilization']:.0%} of peak); only less arithmetic or a faster device helps.")
    return (f"compute-bound kernels ({_op_types(rows)}) that use few cores: units at {util:.0%} of peak, yet "
            f"neither bandwidth, launch cost nor more streams would gain a tenth of the run; larger tiles "
            f"(more blocks per kernel) or batching would.")


MESSAGES = {"memory": _memory, "launch": _launch, "dependency": _dependency, "compute": _compute}
