"""Why the run is slow, ranked by what removing each cause would buy (measured).

The runtime article names three places low utilization comes from (memory access, a
dependency chain too long for the cores, operators so light that launch overhead
dominates); the host blocking on full queues and plain arithmetic make five, and the
launch cost splits into the host's (launch) and the device's per-task dispatch (dispatch).
For each, ``causes.py`` re-simulates the run's tasks, timing only, with that cause taken
away, and ``gain`` is the speedup; the causes are listed best first and ``reason`` is
the first. A gain under ``NEGLIGIBLE`` counts as nothing bought: such causes follow the
others, compute first (the kernels' own work is what is left).

The numbers also carry the checks msprof's advisor makes, under its thresholds: free time
above 10% of the run, operators bound when a pipe (the cube, the vector unit, the HBM
reads) is busy above 0.8 of their duration, and kernels whose block dim is below the
core count.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

from graphexec.profiling import causes as cf
from graphexec.profiling.hta import analyses
from graphexec.profiling.record import RunRecord
from graphexec.profiling.summary import op_rows, roofline

TOP = 5
NEGLIGIBLE = 1.05     # a counterfactual that buys less than 5% names no cause
FREE_TIME = 0.10      # advisor: free time flagged above 10% of the run
PIPE_BOUND = 0.8      # advisor: an operator is bound when a pipe ratio is above 0.8
REASONS = ("dependency", "launch", "dispatch", "memory", "compute", "host")
STAT_KEYS = ("makespan_us", "device_idle_us", "host_wait_us", "mean_queue_depth", "cube_utilization",
             "vector_utilization", "hbm_utilization")


@dataclass(frozen=True)
class Cause:
    """One candidate cause: ``gain`` is the speedup of the run with it removed."""

    reason: str
    gain: float
    message: str
    ops: list[dict[str, Any]]
    numbers: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Diagnosis:
    """The causes best first; ``reason``, ``message``, ``ops`` are the first cause's.
    ``what_if_speedup``/``what_if_streams``: the measured multi-stream what-if (always run);
    ``analyses``: HTA's idle breakdown, critical path, launch and queue statistics."""

    reason: str
    message: str
    ops: list[dict[str, Any]]
    numbers: dict[str, float] = field(default_factory=dict)
    what_if_speedup: float | None = None
    what_if_streams: int | None = None
    causes: list[Cause] = field(default_factory=list)
    analyses: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _top(rows: list[dict[str, Any]], key: Any) -> list[dict[str, Any]]:
    return [{"name": r["Op Name"], "op": r["OP Type"], "us": r["Task Duration(us)"]}
            for r in sorted(rows, key=key, reverse=True)[:TOP]]


def _op_types(rows: list[dict[str, Any]]) -> str:
    counts = Counter(r["OP Type"] for r in rows)
    return ", ".join(f"{op} x{n}" for op, n in counts.most_common(3)) or "none"


def advisor_numbers(record: RunRecord, rows: list[dict[str, Any]], stats: Any) -> dict[str, float]:
    """Shares of kernel time by roofline bound and the advisor's checks."""
    prof = record.profile
    total = sum(r["Task Duration(us)"] for r in rows) or 1.0
    n: dict[str, float] = {f"{b}_bound_share": sum(r["Task Duration(us)"] for r in rows if r["Bound"] == b) / total
                           for b in ("compute", "memory", "overhead")}
    light = [r for r in rows if r["Bound"] == "overhead"]
    ratios = [_pipe_ratios(t, prof) for t in record.tasks if t.kind == "kernel" and t.start_t is not None]
    n.update(kernels=len(rows), overhead_bound_kernels=len(light),
             fixed_share=sum(min(r["Task Duration(us)"], prof.task_overhead_us) for r in light) / total,
             free_time_share=stats.device_idle_us / stats.makespan_us if stats.makespan_us else 0.0,
             free_time_flagged=float(stats.makespan_us > 0 and stats.device_idle_us > FREE_TIME * stats.makespan_us),
             mac_bound_ops=sum(c > PIPE_BOUND for c, _ in ratios),
             mte2_bound_ops=sum(m > PIPE_BOUND for _, m in ratios),
             low_block_dim_ops=sum(r["Block Dim"] < prof.ai_cores for r in rows if r["Task Type"] != "AI_CPU"))
    return n


def _pipe_ratios(t: Any, profile: Any) -> tuple[float, float]:
    """(compute pipe, HBM read pipe) busy shares of a kernel's duration, by the roofline."""
    _, compute, memory = roofline(t, profile)
    dur = t.end_t - t.start_t
    return (compute / dur, memory / dur) if dur > 0 else (0.0, 0.0)


def diagnose(record: RunRecord, stats: Any) -> Diagnosis:
    """The causes of the run in ``record`` (whose stats are ``stats``), best first."""
    rows = [r for r in op_rows(record) if r["Task Type"] != "MEMCPY_ASYNC"]
    n: dict[str, float] = {k: getattr(stats, k) for k in STAT_KEYS}
    n.update(advisor_numbers(record, rows, stats), streams=stats.num_streams)
    base, exps = cf.experiments(record.plan, record.graph_mode)
    gains = {r: cf.gain(base, exps[r]) for r in REASONS}
    dep = exps["dependency"]
    n.update(what_if_base_us=base, what_if_best_us=dep.makespan_us, what_if_speedup=gains["dependency"],
             what_if_streams=dep.streams or 1, **{f"{r}_gain": g for r, g in gains.items()},
             **{f"{r}_us": exps[r].makespan_us for r in REASONS})
    extra = analyses(record)
    n["host_blocked_us"] = sum(q["blocked_us"] for q in extra["queues"].values())
    listed = [_cause(r, gains[r], n, rows, record.profile, dep) for r in order(gains)]
    first = listed[0]
    return Diagnosis(first.reason, first.message, first.ops, n, gains["dependency"], dep.streams or 1, listed, extra)


def order(gains: dict[str, float]) -> list[str]:
    """Causes that buy something by gain (see ``causes.ranked``), then the rest, compute first."""
    real = cf.ranked({r: g for r, g in gains.items() if g >= NEGLIGIBLE})
    rest = [r for r in ("compute", "memory", "dependency", "dispatch", "launch", "host") if r not in real]
    return real + rest


PICK: dict[str, Callable[[dict[str, Any]], bool]] = {
    "memory": lambda r: r["Bound"] == "memory", "launch": lambda r: r["Bound"] == "overhead",
    "dispatch": lambda r: r["Bound"] == "overhead", "compute": lambda r: r["Bound"] == "compute",
    "dependency": lambda r: True, "host": lambda r: True}


def _cause(reason: str, gain: float, n: dict[str, float], rows: list[dict[str, Any]], profile: Any,
           dep: cf.Experiment) -> Cause:
    chosen = [r for r in rows if PICK[reason](r)] or rows
    cores = profile.ai_cores
    if reason == "dependency":   # the kernels that leave the most cores idle for the longest
        ops = _top(chosen, lambda r: (cores - min(cores, r["Block Dim"])) * r["Task Duration(us)"])
    elif reason == "host":       # the kernels that waited longest after the one before on their stream
        ops = _top(chosen, lambda r: r["Task Wait Time(us)"])
    else:
        ops = _top(chosen, lambda r: r["Task Duration(us)"])
    text = MESSAGES[reason](n, chosen, profile, dep)
    if gain < NEGLIGIBLE:
        text = f"{reason}: removing it buys {gain:.2f}x (under {NEGLIGIBLE - 1:.0%}, nothing); " + text
    numbers = {"gain": gain, "makespan_us": n["makespan_us"], "counterfactual_us": n[f"{reason}_us"]}
    return Cause(reason, gain, text, ops, numbers)


def _took(n: dict[str, float], reason: str) -> str:
    return (f"the same tasks take {n[f'{reason}_us']:,.1f} us instead of {n['what_if_base_us']:,.1f} us "
            f"({n[f'{reason}_gain']:.2f}x)")


def _memory(n: dict[str, float], rows: list[Any], profile: Any, dep: cf.Experiment) -> str:
    return (f"memory-bound: {n['memory_bound_share']:.0%} of kernel time is in kernels limited by HBM bandwidth "
            f"({_op_types(rows)}), HBM at {n['hbm_utilization']:.0%} of peak; with twice the bandwidth "
            f"{_took(n, 'memory')}. Move fewer bytes: fuse the elementwise chains, use float16, keep tensors on chip.")


def _launch(n: dict[str, float], rows: list[Any], profile: Any, dep: cf.Experiment) -> str:
    return (f"launch-bound: the device waited {n['host_wait_us']:,.1f} us of {n['makespan_us']:,.1f} us on the host "
            f"({profile.launch_cost_us:g} us a launch, mean queue depth {n['mean_queue_depth']:.1f}); launched as one "
            f"graph with no host launch cost {_took(n, 'launch')}. Run with launch='graph' (graph sink) or fuse the "
            f"small ops so fewer tasks are launched.")


def _dispatch(n: dict[str, float], rows: list[Any], profile: Any, dep: cf.Experiment) -> str:
    return (f"dispatch-bound: {int(n['overhead_bound_kernels'])} of {int(n['kernels'])} kernels ({_op_types(rows)}) "
            f"do less work than the device's {profile.task_overhead_us:g} us per-task overhead; without that "
            f"overhead {_took(n, 'dispatch')}, the most fusing can approach. Fuse the small ops or batch them into "
            f"bigger kernels.")


def _dependency(n: dict[str, float], rows: list[Any], profile: Any, dep: cf.Experiment) -> str:
    return (f"dependency-bound: {int(n['low_block_dim_ops'])} kernels use fewer blocks than the {profile.ai_cores} "
            f"cores and {int(n['streams'])} stream(s) run them one after another (cube at {n['cube_utilization']:.0%},"
            f" free time {n['free_time_share']:.0%}); on {dep.streams} streams (policy {dep.policy}) "
            f"{_took(n, 'dependency')}. Run with --streams {dep.streams} or --streams auto.")


def _compute(n: dict[str, float], rows: list[Any], profile: Any, dep: cf.Experiment) -> str:
    return (f"compute-bound: {n['compute_bound_share']:.0%} of kernel time is in kernels limited by the cube or "
            f"vector units ({_op_types(rows)}; cube at {n['cube_utilization']:.0%}, vector at "
            f"{n['vector_utilization']:.0%} of peak, {int(n['mac_bound_ops'])} ops above {PIPE_BOUND} on the "
            f"compute pipe); with twice the peak {_took(n, 'compute')}. Less arithmetic, float16/int8 on the cube "
            f"or a faster device helps.")


def _host(n: dict[str, float], rows: list[Any], profile: Any, dep: cf.Experiment) -> str:
    return (f"host-bound: the host blocked {n['host_blocked_us']:,.1f} us on full command queues (depth "
            f"{profile.queue_depth}), so it could not launch ahead of the device; if it never blocked "
            f"{_took(n, 'host')}. Use deeper queues, launch in an order that interleaves the streams, or launch "
            f"the graph as one (graph mode).")


MESSAGES = {"memory": _memory, "launch": _launch, "dispatch": _dispatch, "dependency": _dependency,
            "compute": _compute, "host": _host}
