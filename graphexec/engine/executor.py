"""The executor: launches a compiled schedule on the emulated device.

The runtime's dispatch table keyed by task kind (``runtime/launch.py``, tinygrad's
``pm_exec``) turns each planned task into runtime calls; the executor's context adds
each kernel's math (read, compute, store at its simulated start and end). Tensors live
in device memory at their planned offsets; values whose size is only known at run time
get their own allocation when written, and container values (sequences, maps, strings)
stay on the host.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field, fields
from functools import partial
from typing import Any, Callable, Mapping, Sequence, cast

import numpy as np

from graphexec.engine.host_values import owned
from graphexec.errors import KernelError, OutOfMemoryError
from graphexec.ir import Graph, TensorType
from graphexec.plan import MemoryPlan, Runner, Task, TaskGraph
from graphexec.runtime.launch import LaunchContext
from graphexec.runtime.sim import DeviceTask


@dataclass
class Location:
    ptr: int
    dtype: np.dtype
    shape: tuple[int, ...]


@dataclass(kw_only=True)
class ExecContext(LaunchContext):
    """What the task handlers share during one run.

    ``views`` caches the device-memory view of each planned value (and constants): the
    pool does not move between runs, so a compiled plan keeps them across runs. A value
    that gets a run-time allocation switches the run to a private cache.
    ``direct`` holds the ids of the tasks that may compute into their output views.
    """

    graph: Graph
    tasks: TaskGraph
    runners: Mapping[int, Runner] = field(default_factory=dict)
    where: dict[str, Location] = field(default_factory=dict)     # planned places
    dynamic: dict[str, Location] = field(default_factory=dict)   # run-time allocations
    host: dict[str, Any] = field(default_factory=dict)           # host-only values
    temp_segments: list[int] = field(default_factory=list)
    views: dict[str, Any] = field(default_factory=dict)
    direct: frozenset[int] = frozenset()
    tape: list[int] = field(default_factory=list)   # kernel i appends i at its start, ~i at its end
    log: dict[int, int | None] | None = None   # timing only: the tape's steps as a dict's keys (``steps``)
    starts: Sequence[Callable[[], Any]] | None = None   # kernel i's ``partial(log.setdefault, i, ~i)``, if kept
    log_end: Callable[[Any], None] | None = None         # ``log.setdefault``, with ``starts``
    index: dict[int, int] = field(default_factory=dict)          # kernel task id -> launch index
    calls: dict[int, "KernelCall"] = field(default_factory=dict)
    overlap: Any = None             # threads.Overlap when kernels compute on a thread pool
    inline: bool = False            # compute during the simulation (no tape: a control task reads values)
    prefix: str = ""                # a body's trace names: "If_0/then_branch/"
    outer: dict[str, Any] = field(default_factory=dict)      # a body's outer-scope values, by name
    controls: Mapping[int, Any] = field(default_factory=dict)   # control task id -> its Controller
    metas: Mapping[int, dict[str, Any]] = field(default_factory=dict)   # kernel task id -> its tasks' shared meta

    def kernel(self, task: Task) -> DeviceTask:
        """The device task of a kernel: its math at its start and end, its byte ranges."""
        tid = task.id
        log = self.log
        start: Callable[[], Any]
        end: Callable[[Any], None]
        if log is not None:   # timing only: the start inserts i (and returns ~i), the end inserts ~i
            i = self.index[tid]
            if self.starts is not None and self.log_end is not None:   # the plan's own log: its callables, made once
                start, end = self.starts[i], self.log_end
            else:
                start, end = partial(log.setdefault, i, ~i), log.setdefault   # type: ignore[assignment]
        else:
            call = self.calls.get(tid)
            if call is None:   # ``call``, unrolled: a first run makes one per kernel here
                call = self.calls[tid] = KernelCall(self, task, self.index.get(tid, -1))
            start, end = (call.begin, call.finish) if self.inline else (call.start, call.end)
        meta = self.metas.get(tid)
        if meta is None:
            meta = {"task": task}
        if self.device.checker is None:
            return DeviceTask("kernel", self.streams[self.stream_of[tid]], self.prefix + task.name, task.unit,
                              task.block_dim, task.flops, task.bytes, task.dtype, "d2d", None, start, end, meta)
        return DeviceTask("kernel", self.streams[self.stream_of[tid]], self.prefix + task.name, task.unit,
                          task.block_dim, task.flops, task.bytes, task.dtype, "d2d", None, start, end, meta,
                          _ranges(self, task.reads), _ranges(self, task.writes))   # byte ranges for the checker

    def steps(self) -> list[int]:
        """The tape's steps of this run: ``i`` at kernel i's start, ``~i`` at its end.

        A timing-only run keeps them as the keys of ``log`` in insertion order: each kernel
        starts and ends once, and ``dict.setdefault`` records a step with no Python frame
        (the start's ``setdefault(i, ~i)`` returns ~i, which the simulator hands to the
        end's ``setdefault``), where ``KernelCall.start``/``end`` cost a call each."""
        return self.tape if self.log is None else list(self.log)

    def control(self, task: Task) -> DeviceTask:
        """The device task of an If/Loop/Scan: a switch whose controller runs the bodies."""
        run = self.controls[task.id].start(self, task)
        return DeviceTask("control", self.streams[self.stream_of[task.id]], self.prefix + task.name, unit="",
                          meta={"task": task, "control": run})

    def direct_out(self, task: Task) -> str | None:
        """The output ``task`` may compute into (its one write, where ``direct`` allows)."""
        return task.writes[0] if task.id in self.direct and len(task.writes) == 1 else None

    def call(self, task: Task) -> "KernelCall":
        """The one KernelCall of ``task`` in this run."""
        c = self.calls.get(task.id)
        if c is None:
            c = self.calls[task.id] = KernelCall(self, task, self.index.get(task.id, -1))
        return c

    def read(self, name: str) -> Any:
        """The current value of ``name``: a view of device memory or a host object."""
        v = self.views.get(name)
        return v if v is not None else self._read(name)

    def _read(self, name: str) -> Any:
        root, off = self.tasks.locate(name)
        loc = self.dynamic.get(root) or self.where.get(root)
        if loc is not None:  # an alias presents its part of the root's bytes in its own shape
            if root == name:
                v = self.device.view(loc.ptr, loc.dtype, loc.shape)
            elif name in self.tasks.slots:   # a strided slice: its part of the root's dims
                v = self.device.view(loc.ptr, loc.dtype, loc.shape)[_slot_index(self.tasks.slots[name])]
            else:
                v = self.device.view(loc.ptr + off, *_layout(self.graph.values[name].type))
            self.views[name] = v
            return v
        alias, name = name, root
        if name in self.host:
            return self.host[name]
        const = self.graph.values[name].const
        if const is not None:
            self.views[name] = const
            return const
        if name in self.outer:  # a view of an outer value is that value in the view's shape
            v = self.outer[name]
            return v if alias == name else v.reshape(_layout(self.graph.values[alias].type)[1])
        raise KernelError(f"value {name!r} was read before any task wrote it")

    def write(self, name: str, value: Any, stream: Any = None) -> None:
        """Store a kernel output where the plan put it, or in a new allocation."""
        if not isinstance(value, np.ndarray) or value.dtype == object:
            self.host[name] = owned(value) if isinstance(value, (list, dict)) else value
            return
        view = self.views.get(name)
        if view is value:   # computed in place (``direct``): the bytes are already there
            return
        if view is not None and view.shape == value.shape and view.dtype == value.dtype:
            view[...] = value
            return
        root, off = self.tasks.locate(name)
        if root != name:  # a slice of a no-task Concat: it must be exactly as planned
            t = self.graph.values[name].type
            assert t.shape is not None  # a no-task Concat's slices are static (concat_slices)
            if value.shape != tuple(t.shape) or value.dtype != t.dtype:
                raise KernelError(f"{name!r} came out {value.dtype}{list(value.shape)}, planned {t}")
            if name in self.tasks.slots:
                self._read(name)[...] = value
                return
            self.device.view(self.where[root].ptr + off, t.dtype, value.shape)[...] = value
            return
        loc = self.where.get(name)
        if loc is not None and loc.shape == value.shape and loc.dtype == value.dtype:
            self.device.view(loc.ptr, loc.dtype, loc.shape)[...] = value
            return
        # sized only now: the caching allocator serves it, from the writing stream's pool
        ptr = self.device.allocator.malloc(max(1, value.nbytes), stream or self.device.default_stream)
        self.temp_segments.append(ptr)
        self.dynamic[name] = Location(ptr, value.dtype, value.shape)
        self.views = {}   # cached views may now be stale for this run; the shared cache is left alone
        self.device.view(ptr, value.dtype, value.shape)[...] = value


def made(fixed: dict[str, Any]) -> ExecContext:
    """``ExecContext(**fixed)``, made without the dataclass' ``__init__``: every field not in
    ``fixed`` gets its default, a new one from its factory. A replayed decode step makes one
    context a run, and the generated ``__init__`` of 25 fields was 2-3 us of it."""
    ctx = object.__new__(ExecContext)
    values = ctx.__dict__
    values.update(_DEFAULTS)
    for name, factory in _FACTORIES:
        values[name] = factory()
    values.update(fixed)
    return ctx


_DEFAULTS = {f.name: f.default for f in fields(ExecContext) if f.default is not MISSING}
_FACTORIES = tuple((f.name, f.default_factory) for f in fields(ExecContext) if f.default_factory is not MISSING)


def _sized(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return f"{value.dtype}[{'x'.join(map(str, value.shape))}] needs {value.nbytes} bytes"
    return f"({type(value).__name__}) cannot be held"


class KernelCall:
    """The start and end of one launched kernel: read and compute, then store.

    A task in ``ctx.direct`` computes into its output's view (see ``engine/direct.py``);
    with ``ctx.overlap`` the math may run on a worker thread (see ``engine/threads.py``).
    """

    __slots__ = ("ctx", "task", "out", "index", "pending")

    def __init__(self, ctx: ExecContext, task: Task, index: int) -> None:
        self.ctx, self.task, self.index = ctx, task, index
        self.out = ctx.direct_out(task)
        self.pending: Any = None

    def compute(self, direct: bool = True, scratch: Any = None) -> dict[str, Any]:
        """The outputs; into the output's view when ``direct`` (and allowed), else into
        ``scratch`` if given."""
        ctx = self.ctx
        views = ctx.views
        try:   # the common case: every input has a cached view (or is a constant)
            values = {n: views[n] for n in self.task.reads}
        except KeyError:   # host values, run-time allocations, a first read
            values = {n: ctx.read(n) for n in self.task.reads}
        if not direct:
            out = scratch
        elif self.out is None:
            out = None
        else:   # ``ctx.read``: its cached view, else looked up
            out = views.get(self.out)
            if out is None:
                out = ctx._read(self.out)
        return ctx.runners[self.task.id](values, out)

    def store(self, outputs: dict[str, Any]) -> None:
        """Write the outputs; one computed into its own view (``direct``) is already in place."""
        ctx = self.ctx
        views = ctx.views
        stream = None
        for name, value in outputs.items():
            if value is not None and views.get(name) is value:
                continue
            if stream is None:
                stream = ctx.streams[ctx.stream_of[self.task.id]]
            try:
                ctx.write(name, value, stream)
            except OutOfMemoryError as e:   # a shape known only now: say whose output it is
                raise OutOfMemoryError(f"tensor {name!r} (output of node {self.task.name} ({self.task.op})) "
                                       f"{_sized(value)} at run time: {str(e).split(': ', 1)[-1]}") from None
            views = ctx.views   # a run-time allocation starts a private cache

    def begin(self) -> Any:
        """At the task's simulated start."""
        return self.compute() if self.ctx.overlap is None else self.ctx.overlap.begin(self)

    def finish(self, result: Any) -> None:
        """At the task's simulated end."""
        overlap = self.ctx.overlap
        if overlap is None:
            self.store(result)
            return
        self.store(overlap.finish(self, result))
        overlap.stored(self.task)

    def start(self) -> None:
        """The simulated start: recorded; the math runs when the tape is replayed."""
        self.ctx.tape.append(self.index)

    def end(self, result: Any) -> None:
        self.ctx.tape.append(~self.index)


def _ranges(ctx: ExecContext, names: Sequence[str]) -> list[tuple[int, int, str]]:
    """(ptr, nbytes, name) of planned tensors, for the hazard checker; run-time allocations
    do not exist yet at launch and are left out."""
    out = []
    for name in names:
        root, off = ctx.tasks.locate(name)
        loc, t = ctx.where.get(root), ctx.graph.values[name].type
        if loc is not None and t.dtype is not None and t.shape is not None \
                and all(isinstance(d, (int, np.integer)) for d in t.shape):
            dims = cast("tuple[int, ...]", t.shape)  # all ints (checked just above)
            slot = ctx.tasks.slots.get(name)
            if slot is not None:   # one range per chunk of a strided slice
                out += _chunks(loc, off, slot, name)
                continue
            out.append((loc.ptr + off, int(np.prod(dims, dtype=np.int64)) * np.dtype(t.dtype).itemsize, name))
    return out


def _slot_index(slot: tuple[int, int, int]) -> tuple[slice, ...]:
    """The index of a strided slice (axis, first, end) in its root's array."""
    axis, first, end = slot
    return (slice(None),) * axis + (slice(first, end),)


def _chunks(root: Location, off: int, slot: tuple[int, int, int], name: str) -> list[tuple[int, int, str]]:
    """(ptr, nbytes, name) of each contiguous chunk of a strided slice of ``root``."""
    axis, first, end = slot
    inner = int(np.prod(root.shape[axis + 1:], dtype=np.int64)) * np.dtype(root.dtype).itemsize
    outer = int(np.prod(root.shape[:axis], dtype=np.int64))
    step = int(root.shape[axis]) * inner
    return [(root.ptr + off + i * step, (end - first) * inner, name) for i in range(outer)]


def _layout(t: TensorType) -> tuple[np.dtype, tuple[int, ...]]:
    """dtype and shape of a value in planned bytes: the plan places, and aliases, static types only."""
    assert t.dtype is not None and t.shape is not None
    return t.dtype, cast("tuple[int, ...]", tuple(t.shape))


def place(ctx: ExecContext, plan: MemoryPlan, bases: dict[str, int], at: dict[str, int]) -> None:
    """Map every planned buffer to its device address: ``at`` for those placed one by one
    (the weights, on a device that may hold them for several plans), else its region's base
    plus its offset."""
    for e in plan.buffers:
        ptr = at[e.tensor] if e.tensor in at else bases[e.region] + e.offset
        ctx.where[e.tensor] = Location(ptr, *_layout(ctx.graph.values[e.tensor].type))


def prime_views(ctx: ExecContext) -> None:
    """Cache the view of every value that lives in planned bytes (roots and their aliases)."""
    for name in ctx.tasks.alias:
        root, _ = ctx.tasks.locate(name)
        if root in ctx.where and ctx.graph.values[name].type.is_static:
            ctx._read(name)
    views, view = ctx.views, ctx.device.view
    for name, loc in ctx.where.items():   # roots: ``_read``'s first case, without its lookups
        if name not in views:
            views[name] = view(loc.ptr, loc.dtype, loc.shape)
