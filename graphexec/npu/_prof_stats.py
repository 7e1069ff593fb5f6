"""The stats of an eager card's run: the ``Stats`` fields that need no compiled plan."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from graphexec.engine.metrics import scan
from graphexec.profiling.counters import run_metrics
from graphexec.profiling.record import DeviceRun


@dataclass(frozen=True)
class EagerStats:
    """The numbers of one card's eager work (``Stats``' fields that need no plan)."""

    makespan_us: float
    num_tasks: int
    num_kernels: int
    num_aicpu: int
    num_streams: int
    num_events: int
    cube_utilization: float
    vector_utilization: float
    hbm_utilization: float
    mean_queue_depth: float
    max_queue_depth: int
    device_idle_us: float
    host_wait_us: float
    host_time_us: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def eager_stats(run: DeviceRun) -> EagerStats:
    """The stats of ``run`` from its finished tasks and host launches."""
    done = [t for t in run.tasks if t.start_t is not None]
    seen = scan(done, run.profile)
    span = seen["hi"] - seen["lo"] if seen["hi"] >= seen["lo"] else 0.0
    host = max((lc.end for lc in run.launches), default=0.0) - min((lc.start for lc in run.launches), default=0.0)
    return EagerStats(span, len(done), seen["num_kernels"], seen["num_aicpu"], len({t.stream.id for t in done}),
                      sum(t.kind == "wait" for t in done), **seen["utilization"], **run_metrics(done),
                      host_time_us=host)
