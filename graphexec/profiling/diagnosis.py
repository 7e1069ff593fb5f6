"""Why the run is slow, ranked by what removing each cause would buy (measured).

The runtime article names three places low utilization comes from (memory access, a
dependency chain too long for the cores, operators so light that launch overhead
dominates); the host blocking on full queues and plain arithmetic make five, and the
launch cost splits into the host's (launch) and the device's per-task dispatch (dispatch).
For each, ``causes.py`` re-simulates the run's tasks, timing only, with that cause taken
away, and ``gain`` is the speedup; the causes are listed best first and ``reason`` is
the first. A gain under ``NEGLIGIBLE`` counts as nothing bought: such causes follow the
others, compute first (the kernels' own work is what is left). A cause's counterfactual
changes the device (twice the bandwidth, no per-task overhead), so it explains what bounds
the run and names the profile fields that set the bound (``profile_fields.py``); the advice
is ``actions``: settings the user can change, each measured by re-simulating the plan
compiled again with it (``actions.py``), none of them already in effect.

The numbers also carry the checks msprof's advisor makes, under its thresholds: free time
above 10% of the run, operators bound when a pipe (the cube, the vector unit, the HBM
reads) is busy above 0.8 of their duration, and kernels whose block dim is below the
core count.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Callable

from graphexec.profiling import causes as cf
from graphexec.profiling import replay_causes
from graphexec.profiling.actions import Action, advise
from graphexec.profiling.explain import PIPE_BOUND, message
from graphexec.profiling.hta import analyses
from graphexec.profiling.profile_fields import cause_fields
from graphexec.profiling.record import RunRecord
from graphexec.profiling.summary import NOT_KERNELS, op_rows, roofline

TOP = 5
NEGLIGIBLE = 1.05     # a counterfactual that buys less than 5% names no cause
FREE_TIME = 0.10      # advisor: free time flagged above 10% of the run
REASONS = ("dependency", "launch", "dispatch", "memory", "compute", "host")
STAT_KEYS = ("makespan_us", "device_idle_us", "host_wait_us", "mean_queue_depth", "cube_utilization",
             "vector_utilization", "hbm_utilization")


@dataclass(frozen=True)
class Cause:
    """One candidate cause: ``gain`` is the speedup of the run with it removed (a change to
    the device, told as what bounds the run); ``fields`` the profile fields that set the
    bound, each with its value and ``sources:`` line."""

    reason: str
    gain: float
    message: str
    ops: list[dict[str, Any]]
    numbers: dict[str, float] = field(default_factory=dict)
    fields: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class Diagnosis:
    """The causes best first; ``reason``, ``message``, ``ops`` are the first cause's.
    ``what_if_speedup``/``what_if_streams``: the measured multi-stream what-if (always run);
    ``analyses``: HTA's idle breakdown, critical path, launch and queue statistics;
    ``actions``: the settings the user can change that buy at least 5%, best first, each
    measured by re-simulation (``actions.py``), with its flag and Session option."""

    reason: str
    message: str
    ops: list[dict[str, Any]]
    numbers: dict[str, float] = field(default_factory=dict)
    what_if_speedup: float | None = None
    what_if_streams: int | None = None
    causes: list[Cause] = field(default_factory=list)
    analyses: dict[str, Any] = field(default_factory=dict)
    actions: list[Action] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _top(rows: list[dict[str, Any]], key: Any) -> list[dict[str, Any]]:
    return [{"name": r["Op Name"], "op": r["OP Type"], "us": r["Task Duration(us)"]}
            for r in sorted(rows, key=key, reverse=True)[:TOP]]


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
    """The causes of the run in ``record`` (whose stats are ``stats``), best first; a run
    with no plan (eager, ACL) by replaying its tasks (``replay_causes.py``)."""
    if getattr(record, "plan", None) is None:
        return diagnose_planless(record, stats)
    rows = [r for r in op_rows(record) if r["Task Type"] not in NOT_KERNELS]
    n: dict[str, float] = {k: getattr(stats, k) for k in STAT_KEYS}
    n.update(advisor_numbers(record, rows, stats), streams=stats.num_streams)
    base, exps = cf.experiments(record.plan, record.graph_mode)
    gains = {r: cf.gain(base, exps[r]) for r in REASONS}
    dep = exps["dependency"]
    n.update(what_if_base_us=base, what_if_best_us=dep.makespan_us, what_if_speedup=gains["dependency"],
             what_if_streams=dep.streams or 1, **{f"{r}_gain": g for r, g in gains.items()},
             **{f"{r}_us": exps[r].makespan_us for r in REASONS})
    advised, measured = advise(record.plan, base, dep)
    n.update({f"action_{a.name}_{k}": v for a in measured for k, v in (("us", a.makespan_us), ("gain", a.gain))})
    extra = analyses(record)
    n["host_blocked_us"] = sum(q["blocked_us"] for q in extra["queues"].values())
    listed = [_cause(r, gains[r], n, rows, record, dep, advised) for r in order(gains)]
    first = listed[0]
    return Diagnosis(first.reason, first.message, first.ops, n, gains["dependency"], dep.streams or 1, listed, extra,
                     advised)


def diagnose_planless(record: Any, stats: Any) -> Diagnosis:
    """The measured causes of a run with no plan: launch, dispatch, memory and compute by
    replay; no actions (nothing to compile again) and no what-if over streams."""
    rows = [r for r in op_rows(record) if r["Task Type"] not in NOT_KERNELS]
    n: dict[str, float] = {k: getattr(stats, k) for k in STAT_KEYS}
    n.update(advisor_numbers(record, rows, stats), streams=stats.num_streams)
    base, exps = replay_causes.experiments(record.tasks, record.profile)
    gains = {r: cf.gain(base, exps[r]) for r in replay_causes.REASONS}
    n.update(what_if_base_us=base, **{f"{r}_gain": g for r, g in gains.items()},
             **{f"{r}_us": exps[r].makespan_us for r in gains})
    extra = analyses(record)
    n["host_blocked_us"] = sum(q["blocked_us"] for q in extra["queues"].values())
    real = cf.ranked({r: g for r, g in gains.items() if g >= NEGLIGIBLE})
    listed = [_cause(r, gains[r], n, rows, record, cf.Experiment("dependency", base), None)
              for r in real + [r for r in ("compute", "memory", "dispatch", "launch") if r not in real]]
    first = listed[0]
    return Diagnosis(first.reason, first.message, first.ops, n, None, None, listed, extra, [])


def order(gains: dict[str, float]) -> list[str]:
    """Causes that buy something by gain (see ``causes.ranked``), then the rest, compute first."""
    real = cf.ranked({r: g for r, g in gains.items() if g >= NEGLIGIBLE})
    rest = [r for r in ("compute", "memory", "dependency", "dispatch", "launch", "host") if r not in real]
    return real + rest


PICK: dict[str, Callable[[dict[str, Any]], bool]] = {
    "memory": lambda r: r["Bound"] == "memory", "launch": lambda r: r["Bound"] == "overhead",
    "dispatch": lambda r: r["Bound"] == "overhead", "compute": lambda r: r["Bound"] == "compute",
    "dependency": lambda r: True, "host": lambda r: True}


def _cause(reason: str, gain: float, n: dict[str, float], rows: list[dict[str, Any]], record: RunRecord,
           dep: cf.Experiment, actions: list[Action] | None) -> Cause:
    chosen = [r for r in rows if PICK[reason](r)] or rows
    profile = record.profile
    cores = profile.ai_cores
    if reason == "dependency":   # the kernels that leave the most cores idle for the longest
        ops = _top(chosen, lambda r: (cores - min(cores, r["Block Dim"])) * r["Task Duration(us)"])
    elif reason == "host":       # the kernels that waited longest after the one before on their stream
        ops = _top(chosen, lambda r: r["Task Wait Time(us)"])
    else:
        ops = _top(chosen, lambda r: r["Task Duration(us)"])
    fields = cause_fields(reason, profile, record.tasks)
    text = message(reason, n, chosen, profile, dep, fields, actions if gain >= NEGLIGIBLE else None)
    if actions is None and reason == "launch":   # a planless run: its launch counterfactual is a replay
        text = text.replace("(graph mode, the same tasks)", "(the same tasks all enqueued at once, as a "
                                                            "captured NPUGraph's replay approaches)")
    if gain < NEGLIGIBLE:
        text = f"{reason}: removing it buys {gain:.2f}x (under {NEGLIGIBLE - 1:.0%}, nothing); " + text
    numbers = {"gain": gain, "makespan_us": n["makespan_us"], "counterfactual_us": n[f"{reason}_us"]}
    return Cause(reason, gain, text, ops, numbers, fields)
