"""A graph compiled for one input signature: passes run, device memory laid out."""

from __future__ import annotations

import time
from functools import partial
from types import MappingProxyType
from typing import Any, Callable, cast

from graphexec import _switch
from graphexec._limits import gc_paused
from graphexec.engine import io
from graphexec.engine.bodies import with_bodies
from graphexec.engine.control import controllers
from graphexec.engine.device_tensor import DeviceTensor
from graphexec.engine.executor import ExecContext, Location, made, place, prime_views
from graphexec.engine.replay import Tape, replay
from graphexec.engine.result import Result, make_stats
from graphexec.engine.run_stats import StatsPlan
from graphexec.engine.steps import Steps
from graphexec.engine.threads import Overlap, Workers
from graphexec.engine.weights import WeightRegion, WeightStore
from graphexec.errors import OutOfMemoryError
from graphexec.ir import Graph
from graphexec.ir.clone import clone_graph
from graphexec.kernels import parallel
from graphexec.kernels.quiet import run_quietly
from graphexec.passes.base import CompileState, PassManager
from graphexec.passes.direct_writes import DirectWrites
from graphexec.passes.graph_fusion import GraphFusion
from graphexec.passes.host_fusion import HostFusion
from graphexec.passes.l2_reuse import L2Reuse
from graphexec.passes.layout import Layout
from graphexec.passes.lowering import Lowering
from graphexec.passes.makespan_bounds import MakespanBounds
from graphexec.passes.measured import MeasuredDurations
from graphexec.passes.memory_planning import MemoryPlanning
from graphexec.passes.precision import Precision
from graphexec.passes.shape_inference import ShapeInference
from graphexec.passes.size_check import SizeCheck
from graphexec.passes.stream_assignment import StreamAssignment
from graphexec.passes.thread_plan import ThreadPlanning
from graphexec.plan import Bounds, CompileOptions, MemoryPlan, Plan, Schedule, TaskGraph, ThreadPlan
from graphexec.profiling.actions import RECOMPILE
from graphexec.profiling.record import RunRecord
from graphexec.runtime import sim_core
from graphexec.runtime.device import Device
from graphexec.runtime.launch import graph_tasks, launch_all, plain_handlers
from graphexec.runtime.profiles import DeviceProfile
from graphexec.runtime.stream import Stream

REGIONS = ("weight", "io", "activation")
_UNKNOWN = object()   # Compiled.needs_values not worked out yet


def default_passes(options: CompileOptions) -> PassManager:
    """Every compile step, in order; the thread plan only for more than one host thread, the
    measured durations only when the options carry measurements."""
    measured = [MeasuredDurations()] if options.measured is not None else []
    passes = [ShapeInference(), SizeCheck(), GraphFusion(), Layout(), Lowering(), Precision(), L2Reuse(), *measured,
              StreamAssignment(), MemoryPlanning(), HostFusion(), DirectWrites(), MakespanBounds()]
    return PassManager(passes + ([ThreadPlanning()] if options.threads > 1 else []))


def compile(graph: Graph, options: CompileOptions, profile: DeviceProfile) -> Plan:
    """Run the pass pipeline on ``graph`` for ``options.input_types``: the frozen plan, with
    its control-flow bodies compiled by the same pipeline (``engine/bodies.py``)."""
    with gc_paused():   # passes make many small objects; collections would rescan them all
        plan = default_passes(options).run(CompileState(graph, options, profile)).plan()
        return with_bodies(plan, partial(_compile_body, profile=profile))


def _compile_body(graph: Graph, options: CompileOptions, profile: DeviceProfile) -> Plan:
    return compile(clone_graph(graph), options, profile)   # the body's graph stays as converted


def compile_graph(graph: Graph, options: CompileOptions, profile: DeviceProfile,
                  device: Device | None = None) -> Compiled:
    """Compile ``graph`` (:func:`compile`), then load the plan onto ``device`` (None: a
    device of its own; a control-flow body shares its enclosing graph's)."""
    t0 = time.perf_counter()
    with gc_paused():   # plan set-up makes many small objects too
        plan = compile(graph, options, profile)
        return Compiled(plan, time.perf_counter() - t0, device)


# the diagnosis' actions compile a plan's graph again with other options (``profiling/actions.py``)
RECOMPILE.append(lambda graph, options, profile: compile(clone_graph(graph), options, profile))


class Compiled:
    """A plan loaded onto a device holding its weights: allocate, upload, run."""

    def __init__(self, plan: Plan, compile_s: float, device: Device | None = None,
                 weights: WeightStore | None = None, own: bool | None = None) -> None:
        self.plan = plan
        self.state = plan   # the name the tests and benchmarks read the passes' products by
        self.graph: Graph = plan.graph
        self.tasks: TaskGraph = plan.tasks
        self.schedule: Schedule = plan.schedule
        self.memory_plan: MemoryPlan = plan.memory_plan
        self.bounds: Bounds = plan.bounds
        self.fused = plan.fused
        self.profile: DeviceProfile = plan.profile
        self.compile_s = compile_s
        opts = plan.options
        self.device = device or Device(self.profile, check_hazards=opts.check_hazards, graph_mode=opts.graph_mode)
        self.weights = weights or WeightStore(self.device)   # a session's device shares one store by its plans
        self.bases, self.weight_at, self._weight_regions = self._allocate()
        self.controls = controllers(plan, partial(_compile_body, profile=self.profile), self._load_body)
        self._kernels = self.schedule.kernels()
        self._index = {t.id: i for i, t in enumerate(self._kernels)}
        # each kernel's DeviceTask.meta, one read-only dict per plan shared by every run (as the
        # ACL and eager launches share theirs): a dict per task and run was a tenth of what a
        # timing-only run left for the garbage collector to walk
        self._metas = {t.id: cast("dict[str, Any]", MappingProxyType({"task": t})) for t in self._kernels}
        self._tape: Tape | None = None     # the first simulated run, replayed by later runs
        self._spare: Any = None   # the simulator a replayed run threw away (its tape's copy took its place)
        self._where: dict[str, Location] = {}
        self._views: dict[str, Any] = {}
        self._calls: dict[int, Any] = {}   # the kernels' KernelCalls, kept from run to run (see _run)
        self._call_list: list[Any] | None = None   # the same, in launch order, once a threaded run has replayed
        # a simulated run's tape log (``ExecContext.log``) and, once the Python loop launches a run
        # (``_simulate``), its kernels' start and end callables: a partial and two bound methods
        # per kernel and run were a tenth of its launch; the compiled loop needs none of them
        self._log: dict[int, int | None] = {}
        self._log_starts: list[Callable[[], Any]] | None = None
        self._log_end = cast("Callable[[Any], None]", self._log.setdefault)
        self._needs: object = _UNKNOWN     # needs_values, once known
        self._fixed: dict[str, Any] | None = None   # ``context``'s shared fields
        self._prepare()
        # each kernel's replay step, made with the plan where a session owns it (``engine/steps.py``);
        # a body's or a card's plan makes them at its first replay on one thread, if it ever has one
        own = device is None if own is None else own   # a session's plan; not a body's or a card's
        self._steps = self._make_steps() if own and not self.controls and opts.threads == 1 else None
        self.activation_sizes = {e.tensor: e.size for e in self.memory_plan.entries if e.alias_of is None
                                 and e.region == "activation"}   # the executed live peak's tensors
        # what a run's stats read of the kernels, worked out once (``engine/run_stats.py``);
        # a plan with control flow runs its bodies' kernels too: the plain passes measure it
        self.stats_plan = None if self.controls else StatsPlan(self._kernels, self._index, self.activation_sizes,
                                                                self.tasks.root, self.profile)
        self._regions = None if self.controls else dict(self.memory_plan.region_bytes)
        # the launch order as the compiled event loop reads it (``_run_on_core``), with this
        # device's costs: loaded with the model, as the real runtime loads a graph's tasks
        self._graph_tasks = None if self.controls else graph_tasks(self.schedule, self._metas)
        if self._graph_tasks is not None:
            self._graph_tasks.costs(self.device.sim)

    def _load_body(self, plan: Plan) -> "Compiled":
        """A control-flow body's plan on this plan's device (its own pools beside this one's)."""
        return Compiled(plan, sum(plan.timings.values()), self.device)

    def _prepare(self) -> None:
        """What every run shares, worked out once: where each value lives and a view of
        each (the pool does not move)."""
        ctx = self.context(compute=False)
        place(ctx, self.memory_plan, self.bases, self.weight_at)
        prime_views(ctx)

    def context(self, compute: bool = True) -> ExecContext:
        """A fresh run context sharing the prepared views and places; one that computes
        (``compute``) first gets the weights' bytes into device memory."""
        if compute:
            self.weights.write()
        if self._fixed is None:   # the fields every run's context shares, gathered once
            st = self.plan
            self._fixed = dict(device=self.device, stream_of=self.schedule.stream_of, graph=self.graph,
                               tasks=self.tasks, runners=st.runners, where=self._where, views=self._views,
                               direct=st.direct, index=self._index, controls=self.controls, metas=self._metas)
        return made(self._fixed)

    def bind(self, compute: bool = True) -> ExecContext:
        """A run context whose streams and events are made now on the device, whose clock
        keeps running (a multi-device run, ``cluster/cards.py``, launches several plans
        onto one server clock; ``run`` starts the device afresh instead)."""
        ctx = self.context(compute)
        ctx.streams = {i: self._stream(self.device, i) for i in range(len(self.schedule.streams))}
        ctx.events = {i: self.device.create_event() for i in range(self.schedule.num_event_ids)}
        return ctx

    @property
    def thread_plan(self) -> ThreadPlan:
        """Which kernels may compute on worker threads, and what each waits for."""
        if self.plan.threads is None:
            raise RuntimeError("this plan was compiled for one host thread (CompileOptions.threads == 1)")
        return self.plan.threads

    def region_bytes(self) -> dict[str, int]:
        """Device bytes per region: this plan's plus those of every control-flow body plan
        compiled so far (each body keeps its own pool beside the enclosing one)."""
        if self._regions is not None:   # no control flow: the plan's own, fixed
            return dict(self._regions)
        total = dict(self.memory_plan.region_bytes)
        for ctrl in self.controls.values():
            for body in ctrl.bodies:
                for plan in body.plans.values():
                    for region, n in plan.region_bytes().items():
                        total[region] = total.get(region, 0) + n
        return total

    def _allocate(self) -> tuple[dict[str, int], dict[str, int], list[WeightRegion]]:
        """The io and activation regions, each weight's address (its one copy on the
        device, uploaded now if it is new there) and the weight regions used."""
        sizes = self.memory_plan.region_bytes
        total = sum(sizes.values())
        if total > self.profile.hbm_capacity_bytes:
            big = max(self.memory_plan.buffers, key=lambda e: e.size, default=None)
            assert big is not None  # every byte of the regions belongs to a planned buffer
            raise OutOfMemoryError(
                f"{self.graph.source}: the plan needs {total} bytes ({sizes['weight']} weights, {sizes['io']} "
                f"inputs/outputs, {sizes['activation']} activation pool), device {self.profile.name} has "
                f"{self.profile.hbm_capacity_bytes}; the largest tensor is {big.tensor!r} ({big.size} bytes)")
        at, regions = self.weights.place(self.graph, self.memory_plan)
        try:
            return {r: self.device.memory.alloc(sizes[r], tag=r) for r in REGIONS[1:]}, at, regions
        except OutOfMemoryError:
            self.weights.release(regions)
            raise

    def unload(self) -> None:
        """Give the device back this plan's pools, and its weights no other plan uses (and
        those of its control-flow bodies): an evicted signature's plan."""
        for ctrl in self.controls.values():
            for body in ctrl.bodies:
                for plan in body.plans.values():
                    plan.unload()
        for region in REGIONS[1:]:
            self.device.memory.free(self.bases.pop(region))
        self.weights.release(self._weight_regions)
        self._weight_regions = []

    def run(self, feeds: dict[str, Any], workers: Workers | None = None, compute: bool = True,
            keep: frozenset[str] = frozenset()) -> Result:
        """Copy the feeds in, launch every task, synchronize, copy the outputs out;
        with ``workers``, kernels compute on its threads (see ``engine/threads.py``).

        ``compute=False`` is a timing-only run: the same copies (their sizes, no bytes
        moved), the same simulation (or its tape), no kernel math and no outputs; stats,
        trace and profile are the full run's exactly. Only for a plan whose timeline no
        value decides (``needs_values`` is None).

        The cyclic garbage collector is paused meanwhile: a run makes a few small objects
        per task, and the collections they would trigger walk every object alive (the
        graph, earlier results), which cost more than the tasks themselves. numpy's
        floating-point warnings are off once for the run (``kernels/quiet.py``), not per kernel.
        """
        if not compute:   # no kernel math: numpy's warnings need not be switched off
            if self.needs_values is not None:
                raise RuntimeError(f"a timing-only run of a plan whose timeline depends on values: {self.needs_values}")
            with gc_paused():
                return self._run(feeds, workers, compute)
        with gc_paused(), run_quietly():
            return self._run(feeds, workers, compute, keep)

    @property
    def needs_values(self) -> str | None:
        """Why this plan's timeline needs computed values (None: it does not, and a timing-only
        run gives a full run's numbers): a control-flow task reads a condition or trip count,
        or an output's size is known only once a kernel has computed it. Worked out once:
        the plan's controls and places do not change."""
        if self._needs is _UNKNOWN:
            self._needs = self._needs_values()
        return self._needs if isinstance(self._needs, str) else None

    def _needs_values(self) -> str | None:
        if self.controls:
            task = next(t for t in self.tasks.tasks if t.id in self.controls)
            return f"control flow ({task.op} {task.name!r}) decides the timeline"
        for name in self.graph.outputs:
            root, _ = self.tasks.locate(name)
            value = self.graph.values[root]
            if root not in self._where and value.const is None and root not in self.graph.inputs:
                return f"output {name!r} is sized only when computed"
        return None

    def _run(self, feeds: dict[str, Any], workers: Workers | None, compute: bool = True,
             keep: frozenset[str] = frozenset()) -> Result:
        dev = self.device
        dev.reset_run(self._spare)
        self._spare, fresh = None, dev.sim
        ctx = self.context(compute or bool(self.controls))
        ctx.calls = self._calls   # rebound, not rebuilt: making one per kernel and run cost 0.3 us each
        for call in self._calls.values():
            call.ctx, call.pending = ctx, None
        ctx.streams = {i: self._stream(dev, i) for i in range(len(self.schedule.streams))}
        ctx.events = {i: dev.create_event() for i in range(self.schedule.num_event_ids)}
        recorded = replayed = None
        try:
            io.feed_all(dev, ctx, feeds, compute)
            if self.controls:   # the timeline depends on values (a condition, a trip count): compute as it runs
                ctx.inline = True
                self._simulate(ctx)
            else:
                plain = not keep and not any(type(v) is DeviceTensor for v in feeds.values())   # the tape's I/O
                kept = self._tape if plain and _switch.FAST else None   # the switch off: simulate every run
                replayed = kept if kept is not None and kept.fits(dev) else None
                if not replayed:   # the tape's steps, recorded with no call per step
                    self._log.clear()
                    ctx.log, ctx.log_end = self._log, self._log_end
                tape = replayed or self._simulate(ctx)
                recorded = None if replayed or not plain else tape
                if compute:
                    self._replay(ctx, tape, workers)
                else:
                    tape.restore(dev)
            outputs = io.fetch_all(dev, ctx, self.graph.outputs, keep, compute)
            if not compute:
                outputs = {}
        finally:
            if ctx.overlap is not None:
                ctx.overlap.drain()
            for ptr in ctx.temp_segments:
                dev.allocator.free(ptr)
        if replayed is not None and dev.sim is not fresh:
            self._spare = fresh   # the tape's copy took its place: nothing else holds it
        if replayed is not None:
            stats = replayed.stats_for(dev)
        else:
            stats = make_stats(self, dev)
            if dev.checker is not None:
                stats.extra["hazards"] = [h.to_dict() for h in dev.hazards]
            elif recorded is not None:
                recorded.stats, self._tape = stats, recorded
        return Result(outputs, stats, RunRecord.of(dev, self.plan))

    def _replay(self, ctx: ExecContext, tape: Tape, workers: Workers | None) -> None:
        """Compute the kernels in the order the tape recorded (see ``engine/replay.py``)."""
        pool, helpers = None, 0
        if workers is not None and workers.n > 1:   # after the feeds: ready kernels read them
            ctx.overlap = Overlap(workers, ctx, self.thread_plan, self._kernels, tape)
            pool, helpers = workers.pool, workers.n - 1
        with parallel.lend(pool, helpers):
            if ctx.overlap is None and _switch.FAST:
                if self._steps is None:
                    self._steps = self._make_steps()
                self._steps.replay(ctx, tape)
            else:
                if self._call_list is None:   # the KernelCalls stay from run to run (``_run`` rebinds them)
                    self._call_list = [ctx.call(t) for t in self._kernels]
                replay(ctx, tape, self._call_list)
        tape.restore(ctx.device)

    def card_steps(self) -> Steps | None:
        """The replay steps a run that computes during its simulation calls its kernels by
        (``Steps.inline``: a multi-card run), made now if not yet; None for a plan with
        control flow or a thread plan (those compute through their KernelCalls), or with the
        fast paths off."""
        if not _switch.FAST:
            return None
        if self._steps is None and not self.controls and self.plan.options.threads == 1:
            self._steps = self._make_steps()
        return self._steps

    def _make_steps(self) -> Steps:
        ctx = self.context(compute=False)
        ctx.calls = self._calls   # the steps' KernelCalls are the plan's, which every run rebinds
        return Steps(ctx, self._kernels)

    def _simulate(self, ctx: ExecContext) -> Tape:
        """Launch every task and let the simulator run them, recording the order of kernel
        starts and ends (the math runs when the tape is replayed)."""
        dev = ctx.device
        host_start = dev.host_t
        steps = self._run_on_core(ctx)
        if steps is None:
            if ctx.log is self._log:
                ctx.starts = self._starts()
            launch_all(ctx, self.schedule.order)
            dev.synchronize_device()
            steps = ctx.steps()
        return Tape(host_start, steps, dev.sim, list(dev.launches), dev.host_t)

    def _starts(self) -> list[Callable[[], Any]]:
        """Kernel ``i``'s start on the plan's tape log: ``setdefault(i, ~i)``, one bound method for all."""
        if self._log_starts is None:
            setdefault = self._log.setdefault
            self._log_starts = [partial(setdefault, i, ~i) for i in range(len(self._kernels))]
        return self._log_starts

    def _run_on_core(self, ctx: ExecContext) -> list[int] | None:
        """The same launch and synchronize by the compiled event loop (``runtime/sim_core.py``),
        where it applies: a tape-logged run of a plan with no control flow; else None."""
        if ctx.log is None or self.controls or ctx.prefix or not sim_core.enabled() or not plain_handlers():
            return None
        tasks = self._graph_tasks
        if tasks is None:
            return None
        return sim_core.run_graph(ctx.device, [ctx.streams[i] for i in range(len(ctx.streams))], ctx.events, tasks)

    def _stream(self, dev: Device, i: int) -> Stream:
        prio = self.schedule.priorities[i] if i < len(self.schedule.priorities) else None
        if i == 0 and prio is None:
            return dev.default_stream
        return dev.create_stream() if prio is None else dev.create_stream(priority=prio)

    def _feed(self, ctx: ExecContext, name: str, value: Any, compute: bool = True) -> None:
        io.feed(self.device, ctx, name, value, compute)

    def _fetch(self, ctx: ExecContext, name: str, compute: bool = True) -> Any:
        return io.fetch(self.device, ctx, name, compute)
