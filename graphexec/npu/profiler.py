"""``with npu.profiler.profile(output_dir):`` profiles the eager work of the block.

On exit the current device is synchronized and the tasks that ran meanwhile (kernels,
copies, events, with the host's launches) are written by graph mode's own exporter
(``graphexec.profiling.export.write_profile``), the files ``graphexec run --profile``
writes. Eager work has no compiled plan: the rows carry each op's type, and the pool
counter is left out.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from types import SimpleNamespace, TracebackType
from typing import Any, cast

from graphexec.engine.result import Result, Stats
from graphexec.ir import Graph
from graphexec.npu._state import STATE, Card
from graphexec.profiling.export import write_profile
from graphexec.profiling.record import RunRecord

_WORK = ("kernel", "memcpy", "control")


@dataclass
class _EagerPlan:
    """What the exporter reads of a compiled plan, for work that had none."""

    profile: Any
    graph: Graph = field(default_factory=lambda: Graph("eager"))
    device: Any = field(default_factory=lambda: SimpleNamespace(graph_mode=False))
    memory_plan: Any = field(default_factory=lambda: SimpleNamespace(buffers=[]))
    tasks: Any = field(default_factory=lambda: SimpleNamespace(root=lambda name: name))

    def region_bytes(self) -> dict[str, int]:
        return {}


class profile:
    """Profile the block's eager work into ``output_dir`` (torch_npu.profiler style)."""

    def __init__(self, output_dir: str | os.PathLike[str], device: Any = None) -> None:
        self.output_dir = output_dir
        self.card: Card | None = None
        self.paths: list[Any] = []
        self._device = device

    def __enter__(self) -> profile:
        self.card = STATE.card(self._device)
        dev = self.card.device
        dev.synchronize_device()
        self._marks = (len(dev.sim.finished), len(dev.launches), dev.sim.now)
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if kind is not None or self.card is None:
            return
        self.paths = write_profile(self.result(), self.output_dir)

    def result(self) -> Result:
        """The profiled window as a Result (stats cover its tasks)."""
        assert self.card is not None
        dev = self.card.device
        dev.synchronize_device()
        done, launched, t0 = self._marks
        tasks = dev.sim.finished[done:]
        samples = [s for s in dev.sim.samples if s[0] >= t0]
        sim = SimpleNamespace(streams=dev.sim.streams, finished=tasks, samples=samples)
        record = RunRecord(tasks, dev.launches[launched:], sim, cast(Any, _EagerPlan(dev.profile)))
        return Result({}, _stats(tasks, dev.profile), record)


def _stats(tasks: list[Any], prof: Any) -> Stats:
    """The window's counts and makespan; eager work has no plan, so no bounds (0) and no pool."""
    work = [t for t in tasks if t.kind in _WORK and t.start_t is not None]
    span = max((t.end_t for t in work), default=0.0) - min((t.start_t for t in work), default=0.0)
    kernels = [t for t in work if t.kind == "kernel"]
    return Stats(makespan_us=span, lower_bound_us=0.0, critical_path_us=0.0, num_tasks=len(work),
                 num_kernels=len(kernels), num_aicpu=sum(t.unit == "aicpu" for t in kernels),
                 num_streams=len({t.stream.id for t in tasks}), num_events=sum(t.kind == "record" for t in tasks),
                 waits_before_pruning=0, num_event_ids=0, cube_utilization=0.0, vector_utilization=0.0,
                 hbm_utilization=0.0, peak_bytes=0, lower_bound_bytes=0, cut_bound_bytes=None, no_reuse_bytes=0,
                 weight_bytes=0, io_bytes=0, host_time_us=0.0, compile_s=0.0)
