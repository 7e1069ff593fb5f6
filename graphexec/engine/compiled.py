"""A graph compiled for one input signature: passes run, device memory laid out."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from graphexec.engine.executor import ExecContext, launch_all, place
from graphexec.engine.result import Result, make_stats
from graphexec.errors import OutOfMemoryError
from graphexec.passes.base import CompileState, PassManager
from graphexec.passes.lowering import Lowering
from graphexec.passes.memory import MemoryPlan, MemoryPlanning
from graphexec.passes.shapes import ShapeInference
from graphexec.passes.scheduling import StreamAssignment
from graphexec.profiling.record import RunRecord
from graphexec.profiling.trace import chrome_trace
from graphexec.runtime.device import Device
from graphexec.runtime.profiles import DeviceProfile

REGIONS = ("weight", "io", "activation")


def default_passes() -> PassManager:
    return PassManager([ShapeInference(), Lowering(), StreamAssignment(), MemoryPlanning()])


def compile_graph(graph: Any, options: Any, profile: DeviceProfile) -> "Compiled":
    """Run the pass pipeline on ``graph`` for ``options.input_types``."""
    t0 = time.perf_counter()
    state = default_passes().run(CompileState(graph, options, profile))
    return Compiled(state, profile, time.perf_counter() - t0)


class Compiled:
    """The products of compilation plus a device holding the weights."""

    def __init__(self, state: CompileState, profile: DeviceProfile, compile_s: float) -> None:
        self.state = state
        self.graph = state.graph
        self.tasks = state.tasks
        self.schedule = state.schedule
        self.memory_plan: MemoryPlan = state.memory_plan
        self.profile = profile
        self.compile_s = compile_s
        opts = state.options
        self.device = Device(profile, check_hazards=bool(getattr(opts, "check_hazards", False)),
                             graph_mode=getattr(opts, "launch", "graph") == "graph")
        self.bases = self._allocate()
        self._upload_weights()

    def _allocate(self) -> dict[str, int]:
        sizes = self.memory_plan.region_bytes
        total = sum(sizes.values())
        if total > self.profile.hbm_capacity_bytes:
            big = max(self.memory_plan.entries, key=lambda e: e.size, default=None)
            raise OutOfMemoryError(
                f"{self.graph.source}: the plan needs {total} bytes ({sizes['weight']} weights, {sizes['io']} "
                f"inputs/outputs, {sizes['activation']} activation pool), device {self.profile.name} has "
                f"{self.profile.hbm_capacity_bytes}; the largest tensor is {big.tensor!r} ({big.size} bytes)")
        return {r: self.device.memory.alloc(sizes[r], tag=r) for r in REGIONS}

    def _upload_weights(self) -> None:
        for e in self.memory_plan.entries:
            if e.region == "weight":
                const = np.ascontiguousarray(self.graph.values[e.tensor].const)
                view = self.device.view(self.bases["weight"] + e.offset, const.dtype, const.shape)
                self.device.memcpy_sync(const.nbytes, "h2d", lambda v=view, c=const: v.__setitem__(..., c))

    def run(self, feeds: dict[str, Any]) -> Result:
        """Copy the feeds in, launch every task, synchronize, copy the outputs out."""
        dev = self.device
        dev.reset_run()
        ctx = ExecContext(dev, self.graph, self.tasks)
        place(ctx, self.memory_plan, self.bases)
        ctx.streams = {i: self._stream(dev, i) for i in range(len(self.schedule.streams))}
        ctx.events = {i: dev.create_event() for i in range(self.schedule.num_event_ids)}
        try:
            for name, value in feeds.items():
                self._feed(ctx, name, value)
            launch_all(ctx, self.schedule.order)
            dev.synchronize_device()
            outputs = {name: self._fetch(ctx, name) for name in self.graph.outputs}
        finally:
            for ptr in ctx.temp_segments:
                dev.allocator.free(ptr)
        stats = make_stats(self, dev)
        if dev.checker is not None:
            stats.extra["hazards"] = [h.to_dict() for h in dev.hazards]
        return Result(outputs, stats, chrome_trace(dev, self.graph.name), RunRecord.of(dev, self))

    def _stream(self, dev: Device, i: int) -> Any:
        prio = self.schedule.priorities[i] if i < len(self.schedule.priorities) else None
        if i == 0 and prio is None:
            return dev.default_stream
        return dev.create_stream() if prio is None else dev.create_stream(priority=prio)

    def _feed(self, ctx: ExecContext, name: str, value: Any) -> None:
        loc = ctx.where.get(name)
        if loc is None or not isinstance(value, np.ndarray):
            ctx.host[name] = value
            return
        view = self.device.view(loc.ptr, loc.dtype, loc.shape)
        self.device.memcpy_sync(value.nbytes, "h2d", lambda: view.__setitem__(..., value))

    def _fetch(self, ctx: ExecContext, name: str) -> Any:
        value = ctx.read(name)
        if not isinstance(value, np.ndarray):
            return value
        out = np.empty(value.shape, value.dtype)
        self.device.memcpy_sync(value.nbytes, "d2h", lambda: out.__setitem__(..., value))
        return out
