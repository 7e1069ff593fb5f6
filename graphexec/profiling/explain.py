"""What bounds a run, in words: each cause's evidence, the profile fields that set its
bound (value and source), its sensitivity, and the measured actions that address it.

A cause's counterfactual (twice the bandwidth, no per-task overhead, ...) changes the
device, not a setting, so it is told as an explanation of the bound; the advice is the
actions (``actions.py``), each a flag or Session option with its measured gain.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from graphexec.profiling import causes as cf
from graphexec.profiling.actions import Action
from graphexec.profiling.profile_fields import describe

PIPE_BOUND = 0.8      # advisor: an operator is bound when a pipe ratio is above 0.8
# the actions that can move each cause's bound
HELPS: dict[str, tuple[str, ...]] = {
    "memory": ("fusion", "precision"), "compute": ("precision",), "dispatch": ("fusion", "graph_mode", "streams"),
    "launch": ("graph_mode", "fusion"), "dependency": ("streams",), "host": ("graph_mode", "streams"),
}


def op_types(rows: list[dict[str, Any]]) -> str:
    counts = Counter(r["OP Type"] for r in rows)
    return ", ".join(f"{op} x{n}" for op, n in counts.most_common(3)) or "none"


def _took(n: dict[str, float], reason: str) -> str:
    return (f"the same tasks would take {n[f'{reason}_us']:,.1f} us instead of {n['what_if_base_us']:,.1f} us "
            f"({n[f'{reason}_gain']:.2f}x)")


def helps(reason: str, actions: list[Action]) -> str:
    """The advised actions that address ``reason``, with their gains and flags."""
    mine = [a for a in actions if a.name in HELPS[reason]]
    if not mine:
        return "No setting measured here buys 5% or more against it."
    return "What you can do: " + "; ".join(f"{a.name} {a.gain:.2f}x ({a.flag})" for a in mine) + "."


def memory(n: dict[str, float], rows: list[Any], profile: Any, dep: cf.Experiment, fields: str) -> str:
    return (f"memory-bound: {n['memory_bound_share']:.0%} of kernel time is in kernels limited by HBM bandwidth "
            f"({op_types(rows)}), HBM at {n['hbm_utilization']:.0%} of peak. The bound is set by {fields}; at "
            f"twice that bandwidth (the chip's, not a setting) {_took(n, 'memory')}.")


def launch(n: dict[str, float], rows: list[Any], profile: Any, dep: cf.Experiment, fields: str) -> str:
    return (f"launch-bound: the device waited {n['host_wait_us']:,.1f} us of {n['makespan_us']:,.1f} us on the host "
            f"(mean queue depth {n['mean_queue_depth']:.1f}). The bound is set by {fields}; with no host launch "
            f"per task (graph mode, the same tasks) {_took(n, 'launch')}.")


def dispatch(n: dict[str, float], rows: list[Any], profile: Any, dep: cf.Experiment, fields: str) -> str:
    return (f"dispatch-bound: {int(n['overhead_bound_kernels'])} of {int(n['kernels'])} kernels ({op_types(rows)}) "
            f"do less work than the device's per-task overhead. The bound is set by {fields}; with no such "
            f"overhead (the device's, not a setting; the most fewer tasks can approach) {_took(n, 'dispatch')}.")


def dependency(n: dict[str, float], rows: list[Any], profile: Any, dep: cf.Experiment, fields: str) -> str:
    return (f"dependency-bound: {int(n['low_block_dim_ops'])} kernels use fewer blocks than the cores and "
            f"{int(n['streams'])} stream(s) run them one after another ({profile.unit_name('cube')} at "
            f"{n['cube_utilization']:.0%}, "
            f"free time {n['free_time_share']:.0%}). The bound is set by {fields}; on {dep.streams} streams "
            f"(policy {dep.policy}) {_took(n, 'dependency')}.")


def compute(n: dict[str, float], rows: list[Any], profile: Any, dep: cf.Experiment, fields: str) -> str:
    cube, vector = profile.unit_name("cube"), profile.unit_name("vector")
    return (f"compute-bound: {n['compute_bound_share']:.0%} of kernel time is in kernels limited by the "
            f"{profile.units.cube.label} or {profile.units.vector.label} ({op_types(rows)}; {cube} at "
            f"{n['cube_utilization']:.0%}, {vector} at {n['vector_utilization']:.0%} of peak, "
            f"{int(n['mac_bound_ops'])} ops above {PIPE_BOUND} on the compute pipe). The bound is set by "
            f"{fields}; at twice the peak rates (the chip's, not a setting) "
            f"{_took(n, 'compute')}.")


def host(n: dict[str, float], rows: list[Any], profile: Any, dep: cf.Experiment, fields: str) -> str:
    return (f"host-bound: the host blocked {n['host_blocked_us']:,.1f} us on full command queues, so it could "
            f"not launch ahead of the device. The bound is set by {fields} (CANN has no queue-depth setting); "
            f"if the host never blocked {_took(n, 'host')}.")


MESSAGES = {"memory": memory, "launch": launch, "dispatch": dispatch, "dependency": dependency,
            "compute": compute, "host": host}


def message(reason: str, n: dict[str, float], rows: list[Any], profile: Any, dep: cf.Experiment,
            fields: list[dict[str, Any]], actions: list[Action] | None) -> str:
    """A cause's full text: what bounds the run, by which fields, and (``actions`` not None:
    a cause that bounds the run) what can be done."""
    text = MESSAGES[reason](n, rows, profile, dep, describe(fields) or "the device profile")
    return text if actions is None else text + " " + helps(reason, actions)
