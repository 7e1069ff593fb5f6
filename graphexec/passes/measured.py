"""Measured durations instead of the cost model: a run profiled on real hardware (msprof's
op_summary, a GPU kernel trace) times the tasks it measured, so what-ifs (other stream
counts and policies, fusion, more cards) start from the user's own device.

Matching, for each kernel task in topological order (``match``):
1. the op name, type and input shapes all equal a measured op's;
2. else name and type, when one measured op has them and its first input's first dimension
   (the batch) is the task's, or it records no shapes (graphexec's own trace): a real profile
   writes its shapes in the device's layout (5HD ``N,C1,H,W,C0`` on Ascend), so only the
   batch is compared; a measurement at another batch (or a card's share of it) times nothing;
3. else type and input shapes, the k-th such task taking the k-th such measured op (a real
   profile's op names are the compiler's, not the graph's).
A task with no match keeps the cost model's time; ``coverage`` says how many matched.

A matched kernel becomes work the simulator times at the measured duration: its bytes are
zero (the measurement already holds its memory time, so it takes no HBM share from the
others) and its flops are those ``runtime/kernel_time`` turns into a block of
``measured - task_overhead_us`` on the task's own block dim (``retime``, a monotone
search on the kernel-time function, so it follows whatever that function is). Alone on a
stream a task then lasts exactly its measured duration; beside others its blocks still
wait for free cores. A measured time below the kernel's fixed costs is clamped to them.
Runs after l2_reuse (which it overrides) and before stream assignment (which it informs).
"""

from __future__ import annotations

from dataclasses import replace

from graphexec.ir import Graph
from graphexec.passes.base import CompileState, Pass, PassResult
from graphexec.plan.measured import MeasuredOp, MeasuredTimes
from graphexec.plan.tasks import Task, TaskGraph, TaskKind
from graphexec.runtime.kernel_time import kernel_time
from graphexec.runtime.profiles import DeviceProfile

KERNELS = (TaskKind.KERNEL, TaskKind.AICPU)


def shapes_text(graph: Graph, names: list[str] | tuple[str, ...]) -> str:
    """Input shapes as msprof writes them: ``1,3,224,224;64,3,7,7``, ``?`` where unknown."""
    out = []
    for name in names:
        value = graph.values.get(name) if name else None
        shape = None if value is None or value.type is None else value.type.shape
        out.append("?" if shape is None else ",".join(str(d) if isinstance(d, int) else "?" for d in shape))
    return ";".join(out)


def _key(graph: Graph, t: Task) -> tuple[str, str, str]:
    return t.name, t.op, shapes_text(graph, t.node.inputs if t.node is not None else [])


def _batch(shapes: str) -> str:
    """The first dimension of the first input in an msprof shape cell ("" when none)."""
    return shapes.split(";", 1)[0].split(",", 1)[0].strip()


def match(graph: Graph, tasks: TaskGraph, measured: MeasuredTimes) -> dict[int, MeasuredOp]:
    """Task id -> the measured op that times it (see the module docstring for the rules)."""
    exact = {(o.name, o.op, o.shapes): o for o in measured.ops}
    named: dict[tuple[str, str], list[MeasuredOp]] = {}
    typed: dict[tuple[str, str], list[MeasuredOp]] = {}
    for o in measured.ops:
        named.setdefault((o.name, o.op), []).append(o)
        typed.setdefault((o.op, o.shapes), []).append(o)
    used: set[int] = set()
    out: dict[int, MeasuredOp] = {}
    for t in tasks.tasks:   # a valid (topological) order
        if t.kind not in KERNELS:
            continue
        name, op, shapes = _key(graph, t)
        found = exact.get((name, op, shapes))
        same = named.get((name, op), ())
        if found is None and len(same) == 1 and (not same[0].shapes or _batch(same[0].shapes) == _batch(shapes)):
            found = same[0]
        if found is None:
            found = next((o for o in typed.get((op, shapes), ()) if id(o) not in used), None)
        if found is not None:
            used.add(id(found))
            out[t.id] = found
    return out


def retime(t: Task, us: float, profile: DeviceProfile) -> Task:
    """``t`` as work of no bytes whose flops the kernel-time function makes ``us`` long
    (plus the task overhead) on ``t``'s block dim; clamped at its fixed costs."""
    target = us - profile.task_overhead_us

    def block_us(flops: float) -> float:
        return kernel_time(profile, t.unit, t.dtype, flops, 0.0, t.block_dim, t)[1]

    low, high = 0.0, 1e6
    if block_us(low) >= target:
        return replace(t, flops=0.0, bytes=0.0)
    for _ in range(64):   # 1e6 * 4**64 flops: far past any kernel; a time flops do not move is left alone
        if block_us(high) >= target:
            break
        low, high = high, high * 4
    else:
        return t
    for _ in range(200):   # secant, kept inside the bracket (bisection when it leaves it)
        f_lo, f_hi = block_us(low), block_us(high)
        guess = low + (target - f_lo) * (high - low) / (f_hi - f_lo) if f_hi > f_lo else (low + high) / 2
        guess = guess if low < guess < high else (low + high) / 2
        got = block_us(guess)
        if abs(got - target) <= 1e-12 * max(target, 1.0):
            return replace(t, flops=guess, bytes=0.0)
        low, high = (guess, high) if got < target else (low, guess)
    return replace(t, flops=(low + high) / 2, bytes=0.0)


def apply(graph: Graph, tasks: TaskGraph, profile: DeviceProfile, measured: MeasuredTimes) -> TaskGraph:
    """``tasks`` with every matched kernel retimed to its measured duration."""
    found = match(graph, tasks, measured)
    if not found:
        return tasks
    return replace(tasks, tasks=[retime(t, found[t.id].us, profile) if t.id in found else t for t in tasks.tasks])


def coverage(graph: Graph, tasks: TaskGraph, measured: MeasuredTimes) -> tuple[int, int]:
    """(kernels timed by a measurement, kernels in all)."""
    return len(match(graph, tasks, measured)), sum(t.kind in KERNELS for t in tasks.tasks)


class MeasuredDurations(Pass):
    name = "measured_durations"

    def call(self, state: CompileState) -> PassResult:
        measured = state.options.measured
        if measured is None:
            return PassResult(state, False)
        tasks = state.need_tasks()
        out = apply(state.graph, tasks, state.profile, measured)
        return PassResult(replace(state, tasks=out), out is not tasks)
