"""What a run returns: outputs, stats and the trace."""

from __future__ import annotations

import copy
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from graphexec.engine import run_stats
from graphexec.engine.metrics import Utilization, executed_live_peak, scan
from graphexec.profiling.counters import RunMetrics, run_metrics
from graphexec.profiling.record import RESULT_OBSERVERS

if TYPE_CHECKING:
    from graphexec.engine.compiled import Compiled
    from graphexec.profiling.diagnosis import Diagnosis
    from graphexec.profiling.record import RunRecord
    from graphexec.runtime.device import Device


@dataclass(frozen=True)
class Stats:
    """Numbers of one run; times are simulated device microseconds.

    ``makespan_us`` spans the first task's start to the last task's end;
    ``lower_bound_us`` is max(critical path at full speed, core-time / cores,
    bytes / HBM bandwidth). Byte counts are the plan's: ``peak_bytes`` is the
    activation pool, ``lower_bound_bytes`` the most activation bytes live at once as
    executed, ``cut_bound_bytes`` the most that may be live together under the schedule's
    partial order (the bound for any plan that is safe whatever the timing).
    Over the makespan: ``mean_queue_depth``/``max_queue_depth`` count tasks in the
    command queues, ``device_idle_us`` is time with no kernel or copy running, and
    ``host_wait_us`` the part of it with every queue empty (the device waited on the host).
    ``precision_mode`` is ATC's precision mode the kernels were timed in, ``precision_computed``
    the one their outputs were computed in ("model": the ONNX model's dtypes).
    ``units`` has the matrix and vector units' utilizations under the profile's own names
    (``units:`` of the device profile: ``{"tensor_core": ..., "cuda_core": ...}`` on a GPU);
    ``cube_utilization`` and ``vector_utilization`` are the same two numbers by role.
    """

    makespan_us: float
    lower_bound_us: float
    critical_path_us: float
    num_tasks: int
    num_kernels: int
    num_aicpu: int
    num_streams: int
    num_events: int
    waits_before_pruning: int
    num_event_ids: int
    cube_utilization: float
    vector_utilization: float
    hbm_utilization: float
    peak_bytes: int
    lower_bound_bytes: int
    cut_bound_bytes: int | None
    no_reuse_bytes: int
    weight_bytes: int
    io_bytes: int
    host_time_us: float
    compile_s: float
    mean_queue_depth: float = 0.0
    max_queue_depth: int = 0
    device_idle_us: float = 0.0
    host_wait_us: float = 0.0
    precision_mode: str = ""
    precision_computed: str = ""
    units: dict[str, float] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Result:
    """``outputs`` (name -> array, graph output order), ``stats`` and ``trace``; ``run``
    keeps what profiling needs (``write_profile``, ``diagnosis``)."""

    outputs: dict[str, Any]
    stats: Stats
    run: "RunRecord | None" = field(default=None, repr=False, compare=False)
    _trace: dict[str, Any] | None = field(default=None, repr=False, compare=False)
    _diagnosis: "Diagnosis | None" = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for observe in RESULT_OBSERVERS:   # profiling from the environment (profiling/env.py), when on
            observe(self)

    @property
    def trace(self) -> dict[str, Any]:
        """The Chrome trace of the run; built on first use (it costs more than the run's
        bookkeeping, and most runs only want outputs)."""
        if self._trace is None:
            from graphexec.profiling.trace import record_trace

            self._trace = record_trace(self.run) if self.run is not None else {"traceEvents": []}
        return self._trace

    def write_profile(self, folder: str | Path) -> list[Path]:
        """Write timeline.json, op_summary.csv and op_statistic.csv into ``folder``."""
        from graphexec.profiling.export import write_profile

        return write_profile(self, folder)

    @property
    def diagnosis(self) -> "Diagnosis":
        """Why the run is slow: causes ranked by the measured gain of removing each
        (``profiling/diagnosis.py``). Computed on first use (it re-simulates the tasks)."""
        if self._diagnosis is None:
            from graphexec.errors import GraphExecError
            from graphexec.profiling.diagnosis import diagnose

            if self.run is None:
                raise GraphExecError("this result keeps no run record to diagnose (it was not made by Session.run)")
            self._diagnosis = diagnose(self.run, self.stats)
        return self._diagnosis

    def __repr__(self) -> str:
        outs = ", ".join(f"{k}: {_short(v)}" for k, v in self.outputs.items())
        return (f"Result(outputs={{{outs}}}, makespan_us={self.stats.makespan_us:,.1f}, "
                f"num_tasks={self.stats.num_tasks}, num_streams={self.stats.num_streams})")


def _short(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return f"{value.dtype.name}[{','.join(map(str, value.shape))}]"
    return type(value).__name__


def select(result: Result, names: Sequence[str], order: Sequence[str]) -> Result:
    """``result`` with only the outputs ``names`` (in that order); an unknown name is an error."""
    from graphexec.errors import GraphExecError

    if isinstance(names, str):
        raise GraphExecError(f"outputs must be a list of names, not the string {names!r}")
    unknown = [n for n in names if n not in order]
    if unknown:
        raise GraphExecError(f"outputs: {unknown[0]!r} is not an output of the graph; outputs are: "
                             f"{', '.join(order)}")
    picked = copy.copy(result)   # not dataclasses.replace: that would observe (profile) the run again
    picked.outputs = {n: result.outputs[n] for n in names if n in result.outputs}
    return picked


def make_stats(compiled: "Compiled", dev: "Device") -> Stats:
    """Stats of the run that just finished on ``dev``: in array passes (``run_stats``) for
    a plan that has them and a run of its kernels each once, else the plain passes
    (``metrics.scan``: one pass for the window, the counts and the utilization). A run of
    up to ``WALK_MAX`` tasks, the plan's kernels and event tasks alone, takes
    ``StatsPlan.walk`` first (one walk over its tasks: fewer steps, and less memory read
    while the caches are cold after a compile, than the passes or numpy's calls)."""
    finished = dev.sim.finished
    plan = compiled.stats_plan
    if plan is not None and len(finished) <= run_stats.WALK_MAX:
        numbers = plan.walk(finished, compiled.profile)
        if numbers is not None:
            return _stats(compiled, dev, finished, *numbers)
    done = [t for t in finished if t.start_t is not None]
    fast = compiled.stats_plan if len(done) >= run_stats.MIN_TASKS else None
    kernels = [t for t in done if t.kind == "kernel"] if fast is not None else []
    ks = fast.order(kernels) if fast is not None else None
    profile = compiled.profile
    if fast is None or ks is None:
        seen = scan(done, profile)
        lo, hi, util = seen["lo"], seen["hi"], seen["utilization"]
        counts = seen["num_kernels"], seen["num_aicpu"]
        live = executed_live_peak(done, compiled.activation_sizes, compiled.tasks.root)
        metrics = run_metrics(done)
    else:
        start = np.array([t.start_t for t in kernels], dtype=np.float64)
        end = np.array([t.end_t for t in kernels], dtype=np.float64)
        lo, hi = run_stats.window(done, start, end)
        util = fast.utilization(ks, profile, hi - lo if hi >= lo else 0.0)
        counts = fast.n - fast.num_aicpu, fast.num_aicpu
        live = fast.live_peak(ks, start, end)
        metrics = run_stats.run_metrics(done, start, end)
    return _stats(compiled, dev, done, hi - lo if hi >= lo else 0.0, counts, util, live, metrics)


def _stats(compiled: "Compiled", dev: "Device", done: list[Any], makespan: float, counts: tuple[int, int],
           util: Utilization, live: int, metrics: RunMetrics) -> Stats:
    lb, cp = compiled.bounds.lower_bound_us, compiled.bounds.critical_path_us
    plan, sched = compiled.memory_plan, compiled.schedule
    regions = compiled.region_bytes()
    precision = compiled.graph.meta.get("precision", {})
    return Stats(
        makespan_us=float(makespan), lower_bound_us=lb, critical_path_us=cp,
        num_tasks=len(done), num_kernels=counts[0], num_aicpu=counts[1],
        num_streams=len(sched.streams), num_events=sched.num_events,
        waits_before_pruning=sched.stats.get("waits_before_pruning", 0), num_event_ids=sched.num_event_ids,
        **util,
        peak_bytes=regions["activation"],
        lower_bound_bytes=live,
        cut_bound_bytes=plan.cut_bound_bytes, no_reuse_bytes=plan.no_reuse_bytes,
        weight_bytes=regions["weight"], io_bytes=regions["io"],
        host_time_us=float(dev.host_t), compile_s=compiled.compile_s,
        precision_mode=precision.get("timed", ""), precision_computed=precision.get("computed", ""),
        units=unit_shares(compiled.profile, util["cube_utilization"], util["vector_utilization"]), **metrics)


def unit_shares(profile: Any, cube: float, vector: float) -> dict[str, float]:
    """The matrix and vector utilizations under the profile's names for those units."""
    return {profile.unit_name("cube"): cube, profile.unit_name("vector"): vector}


def summarize(value: Any, n: int = 5) -> str:
    """A short text of an output: dtype, shape and its first values."""
    if not isinstance(value, np.ndarray):
        return f"{type(value).__name__} of {len(value) if hasattr(value, '__len__') else '?'}"
    flat = value.reshape(-1)[:n]
    vals = ", ".join(f"{v:.6g}" if value.dtype.kind == "f" else str(v) for v in flat)
    more = ", ..." if value.size > n else ""
    text = f"{value.dtype.name}[{','.join(map(str, value.shape))}] [{vals}{more}]"
    if value.size > n and value.dtype.kind in "fiu":
        with np.errstate(all="ignore"):
            text += f" min {value.min():.6g} mean {value.mean():.6g} max {value.max():.6g}"
    return text
