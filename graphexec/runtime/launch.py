"""Launching a schedule onto a device: one dispatch table keyed by task kind.

The executor (``engine/executor.py``) and every timing-only simulation (the ``auto``
stream search, joint memory planning, the diagnosis' what-if) go through the same
table; they differ only in :meth:`LaunchContext.kernel`, which the executor overrides
to attach the kernel's math and the hazard checker's byte ranges.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence, cast

from graphexec.plan.schedule import Schedule
from graphexec.plan.tasks import AnyTask, EventTask, Task, TaskKind
from graphexec.runtime import sim_core
from graphexec.runtime.device import Device
from graphexec.runtime.host import HostLaunch
from graphexec.runtime.profiles import DeviceProfile
from graphexec.runtime.sim import DeviceTask
from graphexec.runtime.stream import Event, Stream


@dataclass(kw_only=True)
class LaunchContext:
    """A device plus the streams and events that a schedule's indices name."""

    device: Device
    stream_of: Sequence[int]
    streams: dict[int, Stream] = field(default_factory=dict)
    events: dict[int, Event] = field(default_factory=dict)

    def kernel(self, task: Task) -> DeviceTask:
        """The device task for a kernel task (timing only: no math)."""
        return DeviceTask("kernel", self.streams[self.stream_of[task.id]], task.name, unit=task.unit,
                          block_dim=task.block_dim, flops=task.flops, bytes=task.bytes, dtype=task.dtype,
                          meta={"task": task})


    def control(self, task: Task) -> DeviceTask:
        """The device task for a control-flow task: timing only, it runs as one opaque
        kernel of the cost lowering gave it (no values, so no branch or trip count)."""
        return self.kernel(task)


def _kernel(ctx: LaunchContext, task: Any) -> None:
    ctx.device.launch(ctx.kernel(task))


def _control(ctx: LaunchContext, task: Task) -> None:
    ctx.device.launch(ctx.control(task))


def _record(ctx: LaunchContext, task: EventTask) -> None:
    ctx.device.record_event(ctx.events[task.event], ctx.streams[task.stream]).meta["task"] = task


def _wait(ctx: LaunchContext, task: EventTask) -> None:
    ctx.device.stream_wait_event(ctx.streams[task.stream], ctx.events[task.event]).meta["task"] = task


_KERNEL, _AICPU = TaskKind.KERNEL, TaskKind.AICPU
_new_launch = tuple.__new__

HANDLERS: dict[TaskKind, Callable[[LaunchContext, Any], None]] = {
    TaskKind.KERNEL: _kernel,
    TaskKind.AICPU: _kernel,
    TaskKind.CONTROL: _control,
    TaskKind.EVENT_RECORD: _record,
    TaskKind.EVENT_WAIT: _wait,
}


def plain_handlers() -> bool:
    """Whether the dispatch table maps kernels to ``_kernel`` (a test may replace it): only
    then may a launch skip it (``launch_all``'s kernels, the compiled loop's whole graph)."""
    return HANDLERS.get(TaskKind.KERNEL) is _kernel and HANDLERS.get(TaskKind.AICPU) is _kernel


def launch_all(ctx: LaunchContext, order: Sequence[AnyTask]) -> None:
    """Launch every task through the dispatch table, in launch order.

    Kernels, most of the tasks, skip the table's lookup while it maps them to ``_kernel``
    (an enum member hashes in Python: the lookup cost more than the launch around it); in
    graph mode they also skip ``Device.launch``'s call and checks, which come to the same
    two steps for every kernel after the first (``Device.graph_launch``).
    """
    if not plain_handlers():
        for task in order:
            HANDLERS[task.kind](ctx, task)
        return
    dev = ctx.device
    launch, kernel = dev.launch, ctx.kernel
    # a destroyed stream: ``launch`` raises on its first task (nothing in the loop destroys one)
    fast = dev.graph_mode and not any(s.destroyed for s in ctx.streams.values())
    bulk = dev.graph_launch() if fast else None
    for task in order:
        kind = task.kind
        if kind is _KERNEL or kind is _AICPU:
            if bulk is None:
                launch(kernel(task))   # type: ignore[arg-type]   # a kernel kind is a Task
                bulk = dev.graph_launch() if fast else None
            else:   # ``Device.launch`` in graph mode, unrolled (``Device.graph_launch``)
                submit, record, start, end = bulk
                t = kernel(task)   # type: ignore[arg-type]
                submit(t, end)
                record(_new_launch(HostLaunch, (t, start, end)))
        else:
            HANDLERS[kind](ctx, task)
            bulk = dev.graph_launch() if fast else None   # asked again: a control task may change it


def simulate_times(schedule: Schedule, profile: DeviceProfile, graph_mode: bool = True,
                   known: dict[int, Any] | None = None) -> tuple[float, dict[int, tuple[float, float]]]:
    """Makespan and each kernel task's (start, end) in a timing-only run (no kernel is
    computed; streams at the default priority); ``known``: kernel times shared among
    schedules of the same plan tasks (see ``GraphTasks._time``)."""
    dev = Device(profile, graph_mode=graph_mode)
    ctx = LaunchContext(device=dev, stream_of=schedule.stream_of)
    ctx.streams = {0: dev.default_stream, **{i: dev.create_stream() for i in range(1, len(schedule.streams))}}
    ctx.events = {i: dev.create_event() for i in range(schedule.num_event_ids)}
    tasks = graph_tasks(schedule, known=known) if graph_mode and sim_core.enabled() and plain_handlers() else None
    if tasks is not None:   # the compiled loop, its times alone (no DeviceTask is made)
        seen = sim_core.graph_times(dev, [ctx.streams[i] for i in range(len(ctx.streams))], tasks)
        if seen is not None:
            return _span({tasks.metas[i].id: times for i, times in seen.items()})
    launch_all(ctx, schedule.order)
    dev.synchronize_device()
    # a finished task has both times (the simulator sets start_t, then end_t)
    times = cast("dict[int, tuple[float, float]]",
                 {t.meta["task"].id: (t.start_t, t.end_t) for t in dev.sim.finished if t.kind == "kernel"})
    return _span(times)


def _span(times: dict[int, tuple[float, float]]) -> tuple[float, dict[int, tuple[float, float]]]:
    if not times:
        return 0.0, {}
    return max(e for _, e in times.values()) - min(s for s, _ in times.values()), times


_CORE_KINDS = {TaskKind.KERNEL: sim_core.KERNEL, TaskKind.AICPU: sim_core.KERNEL,
               TaskKind.EVENT_RECORD: sim_core.RECORD, TaskKind.EVENT_WAIT: sim_core.WAIT}


def graph_tasks(schedule: Schedule, metas: Mapping[int, Any] | None = None,
                known: dict[int, Any] | None = None) -> sim_core.GraphTasks | None:
    """The schedule's tasks in launch order as the compiled loop reads them, each as
    ``launch_all`` launches it (a kernel's meta from ``metas``, else its plan task); None
    for a plan with control flow (its switches launch bodies: the Python loop runs those).
    ``known`` (kernel times by plan task) is shared only where the metas are the plan tasks."""
    entries = []
    stream_of = schedule.stream_of
    for task in schedule.order:
        kind = _CORE_KINDS.get(task.kind)
        if kind is None:
            return None
        if isinstance(task, Task):
            entries.append((kind, stream_of[task.id], task.name, task.unit, task.block_dim, task.flops, task.bytes,
                            task.dtype, task if metas is None else metas[task.id], -1))
        else:
            entries.append((kind, task.stream, "", "", 1, 0.0, 0.0, "float16", task, task.event))
    return sim_core.GraphTasks(entries, known if metas is None else None)


def compiled_makespan(tasks: sim_core.GraphTasks, n_streams: int, n_events: int, profile: DeviceProfile,
                      graph_mode: bool = True) -> float | None:
    """``simulate_makespan`` of a launch order given as the compiled loop's columns
    (``order_tasks``) on ``n_streams`` streams and ``n_events`` events: the same device,
    streams and events, the same loop; None where that loop cannot run it (no C module,
    the plain switch, host launch, a replaced dispatch table: the caller then simulates
    the schedule made whole)."""
    if not (graph_mode and sim_core.enabled() and plain_handlers()):
        return None
    dev = Device(profile, graph_mode=graph_mode)
    streams = [dev.default_stream, *(dev.create_stream() for _ in range(1, n_streams))]
    for _ in range(n_events):
        dev.create_event()
    seen = sim_core.graph_times(dev, streams, tasks)
    return None if seen is None else _span({tasks.metas[i].id: times for i, times in seen.items()})[0]


def order_tasks(kernels: Sequence[Task], stream_of: Sequence[int], order: Sequence[int], waits: Sequence[bool],
                streams: Sequence[int], events: Sequence[int], known: dict[int, Any] | None = None
                ) -> sim_core.GraphTasks | None:
    """``graph_tasks`` of a launch order not made into a Schedule yet: ``order`` holds
    kernel task ids (below ``len(kernels)``, each the task at its index) and
    ``len(kernels) + j`` for the j-th event task, a wait (``waits[j]``) or a record on
    ``streams[j]`` of device event ``events[j]``. The columns are the same as
    ``graph_tasks`` makes of the finished schedule, but an event task's meta is None (a
    timing-only run reads none). None where a task is not a kernel (control flow)."""
    if not all(t.kind is _KERNEL or t.kind is _AICPU for t in kernels):
        return None
    pad = len(waits)
    wait, record = sim_core.WAIT, sim_core.RECORD
    ext = ([sim_core.KERNEL] * len(kernels) + [wait if w else record for w in waits],
           [*stream_of[:len(kernels)], *streams], [t.name for t in kernels] + [""] * pad,
           [t.unit for t in kernels] + [""] * pad, [t.block_dim for t in kernels] + [1] * pad,
           [t.flops for t in kernels] + [0.0] * pad, [t.bytes for t in kernels] + [0.0] * pad,
           [t.dtype for t in kernels] + ["float16"] * pad, [*kernels, *([None] * pad)],
           [-1] * len(kernels) + list(events))
    return sim_core.GraphTasks.from_columns([list(map(col.__getitem__, order)) for col in ext], known)


def simulate_makespan(schedule: Schedule, profile: DeviceProfile, graph_mode: bool = True,
                      known: dict[int, Any] | None = None) -> float:
    """Simulated device time of ``schedule`` on ``profile`` (no kernel is computed)."""
    return simulate_times(schedule, profile, graph_mode, known)[0]
