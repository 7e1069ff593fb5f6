"""On-chip L2 in front of HBM: a tensor one kernel writes and the next reads while it
still fits is served at L2 bandwidth, not from HBM.

Kernels are taken in the task graph's topological order (the order one stream runs them;
several streams interleave them, which this approximation leaves out) and
``runtime/kernel_time.l2_hits`` follows what the profile's L2 holds (a tensor stops taking
capacity after its last kernel: its memory, and so its cache lines, go to later tensors).
Each task's bytes then become HBM-equivalent bytes (``hbm_equivalent``): what L2 serves
counts at the HBM/L2 bandwidth ratio, so the simulator's shared-HBM roofline, the lower
bounds and the HBM figures all see the traffic that really reaches HBM. A profile with no
kernel model has no L2: nothing changes. Runs after lowering (and precision, which sets the
tensors' widths) and before stream assignment, while nothing else holds the tasks.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from graphexec.ir import Graph
from graphexec.passes.base import CompileState, Pass, PassResult
from graphexec.plan.tasks import TaskGraph, TaskKind, retask
from graphexec.runtime.kernel_time import hbm_equivalent, l2_hits
from graphexec.runtime.profiles import DeviceProfile


def _size(graph: Graph, name: str, width: int) -> int:
    """``name``'s bytes on the device: a float tensor at the task's float width (a precision
    mode may run a float32 model in float16), anything else at its own."""
    value = graph.values.get(name)
    t = value.type if value is not None else None
    if t is None or t.dtype is None or t.shape is None:
        return 0
    n = 1
    for d in t.shape:
        if not isinstance(d, int):   # a symbolic dim: unknown, no hit counted
            return 0
        n *= d
    return n * (width if width and t.dtype.kind == "f" else t.dtype.itemsize)


def _width(dtype: str) -> int:
    """The item size of a task's compute dtype when it is a float type, else 0."""
    try:
        d = np.dtype(dtype)
    except TypeError:   # bfloat16 and the like: numpy has no name for them
        return 2 if "16" in dtype else 0
    return d.itemsize if d.kind == "f" else 0


def _part(tasks: TaskGraph, name: str) -> bool:
    """Whether ``name`` is a slice of another tensor (a concatenation's part), not the same
    bytes written again in place."""
    return tasks.root(name) != name and name not in tasks.inplace


def reuse(graph: Graph, tasks: TaskGraph, profile: DeviceProfile) -> TaskGraph:
    """``tasks`` with each device kernel's bytes cut by what L2 serves it."""
    km = profile.kernels
    kernels = [t for t in tasks.tasks if t.kind == TaskKind.KERNEL and t.unit in ("cube", "vector")]
    if km is None or not kernels:
        return tasks
    steps = []
    widths: dict[str, int] = {}               # a task's dtype -> its float width: a few dtypes
    sized: dict[tuple[str, int], int] = {}    # (value, width) -> _size: each value is written, then read
    for t in kernels:
        width = widths.get(t.dtype)
        if width is None:
            width = widths[t.dtype] = _width(t.dtype)
        reads: list[tuple[str, int]] = []
        writes: list[tuple[str, int, bool]] = []
        for r in t.reads:
            if r:
                n = sized.get((r, width))
                reads.append((tasks.root(r), sized.setdefault((r, width), _size(graph, r, width)) if n is None else n))
        for w in t.writes:
            if w:
                n = sized.get((w, width))
                n = sized.setdefault((w, width), _size(graph, w, width)) if n is None else n
                writes.append((tasks.root(w), n, _part(tasks, w)))
        steps.append((reads, writes))
    changed = {}
    for t, hits, (_, writes) in zip(kernels, l2_hits(steps, km.l2_bytes), steps):
        served = min(float(hits), max(0.0, t.bytes - sum(w[1] for w in writes)))   # no more than it reads
        if served > 0:
            changed[t.id] = retask(t, bytes=hbm_equivalent(t.bytes, served, profile))
    if not changed:
        return tasks
    return replace(tasks, tasks=[changed.get(t.id, t) for t in tasks.tasks])


class L2Reuse(Pass):
    name = "l2_reuse"

    def call(self, state: CompileState) -> PassResult:
        tasks = state.need_tasks()
        out = reuse(state.graph, tasks, state.profile)
        return PassResult(replace(state, tasks=out), out is not tasks)
