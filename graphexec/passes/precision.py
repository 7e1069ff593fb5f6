"""Precision as ATC chooses it: each kernel's compute dtype under ``precision_mode``.

ATC's ``--precision_mode`` (CANN 8.x ATC reference, "--precision_mode"):
  force_fp16 (the default)   float32/bfloat16 ops run in float16, cube and vector.
  allow_fp32_to_fp16         cube ops in float16; vector ops keep float32.
  must_keep_origin_dtype     every op in its model dtype; a float32 cube op on a chip whose
                             cube has no float32 path runs as a float32 AI CPU op.
  allow_mix_precision(_fp16) float32 ops drop to float16 except those CANN's mixed-precision
                             list keeps in float32 (here ``KEEP_FP32``, an assumption modelled
                             on that list: reductions, exponentials, normalizations).
  force_fp32 / cube_fp16in_fp32out  cube ops float16 in, float32 out; vector ops float32.
  allow_mix_precision_bf16, allow_fp32_to_bf16  as their float16 twins with bfloat16
                             (Atlas A2, i.e. 910B, only).
The cube of the Atlas training (910) and inference (310P) products has no float32 path
(CANN ops-nn, aclnnMatmul: "Cube单元不支持FLOAT32计算"); 910B's has, and bfloat16. HF32
(``--allow_hf32``) is left out: ATC documents it as reserved, not supported yet.
Profiles of other vendors' chips (GPUs) have no ATC: they default to the model's dtypes.

Timing always follows the mode (the task's dtype picks the rate, its float tensors move
at the mode's width). Numerics follow the model unless ``precision_numerics="device"``:
then a lowered task computes on rounded operands (``kernels/precision.py``). Memory plan
sizes stay the model's dtypes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from types import MappingProxyType

from graphexec.errors import GraphExecError
from graphexec.ir import Graph
from graphexec.kernels.precision import PrecisionRunner
from graphexec.passes.base import CompileState, Pass, PassResult
from graphexec.passes.lowering import dtype_name as _name
from graphexec.plan.tasks import Runner, Task, TaskGraph, TaskKind, retask

MODES = ("force_fp16", "allow_fp32_to_fp16", "must_keep_origin_dtype", "allow_mix_precision",
         "allow_mix_precision_fp16", "force_fp32", "cube_fp16in_fp32out", "allow_mix_precision_bf16",
         "allow_fp32_to_bf16")
NUMERICS = ("model", "device")
_BF16_MODES = ("allow_mix_precision_bf16", "allow_fp32_to_bf16")
_FLOATS = ("float32", "float16", "bfloat16")
_WIDTH = {"float32": 4, "float16": 2, "bfloat16": 2}
# ops a mixed-precision mode keeps in float32 (assumption: CANN's list is per op in its ops-info files)
KEEP_FP32 = frozenset({"Softmax", "LogSoftmax", "LayerNormalization", "ReduceMean", "ReduceSum", "ReduceL2",
                       "ReduceLogSumExp", "Exp", "Log", "Pow", "Sqrt", "Reciprocal", "Erf", "BatchNormalization",
                       "InstanceNormalization", "GroupNormalization", "SimplifiedLayerNormalization"})


@dataclass(frozen=True)
class Chip:
    """What a chip's units compute: ATC's modes apply, the cube's float32 path, bfloat16."""

    ascend: bool
    cube_fp32: bool
    bf16: bool


_CHIPS = {"ascend910": Chip(True, False, False), "ascend310p": Chip(True, False, False),
          "ascend910b": Chip(True, True, True)}


def chip_of(profile: object) -> Chip:
    name = str(getattr(profile, "name", "")).lower()
    for key in sorted(_CHIPS, key=len, reverse=True):   # a derived profile ("ascend910-q1") is its chip's
        if name.startswith(key):
            return _CHIPS[key]
    cube = getattr(getattr(profile, "peak_tflops", None), "cube", {}) or {}
    return Chip(name.startswith("ascend"), "float32" in cube, "bfloat16" in cube)


def resolve(mode: str | None, profile: object) -> str:
    """The mode to time: the one asked for (checked against the chip), else the chip's default."""
    chip = chip_of(profile)
    if mode is None:
        return "force_fp16" if chip.ascend else "must_keep_origin_dtype"
    if mode not in MODES:
        raise GraphExecError(f"precision_mode must be one of {', '.join(MODES)}, not {mode!r}")
    if mode in _BF16_MODES and not chip.bf16:
        raise GraphExecError(f"precision_mode {mode}: {getattr(profile, 'name', 'this device')} has no bfloat16 "
                             "(CANN: Atlas A2 products only)")
    return mode


@dataclass(frozen=True)
class Choice:
    """A task's precision: the dtype that times it, its operands' and its results' dtypes, and
    whether it turns into an AI CPU op."""

    dtype: str
    operand: str
    result: str
    aicpu: bool = False


def choose(task: Task, mode: str, chip: Chip) -> Choice | None:
    """The task's precision under ``mode``, or None when it runs as the model says."""
    d = task.dtype
    if d not in _FLOATS or task.kind is not TaskKind.KERNEL:
        return None
    low = "bfloat16" if mode in _BF16_MODES else "float16"
    if task.unit == "cube":
        if mode == "must_keep_origin_dtype":
            return Choice(d, d, d, aicpu=True) if d == "float32" and not chip.cube_fp32 else None
        if mode in ("force_fp32", "cube_fp16in_fp32out"):
            return Choice("float16", "float16", "float32")
        if mode == "force_fp16" or d == "float32":
            return Choice(low, low, low)
        return None
    if mode == "force_fp16" and d != "float16":
        return Choice("float16", "float16", "float16")
    if mode in ("force_fp32", "cube_fp16in_fp32out") and d != "float32":
        return Choice("float32", "float32", "float32")
    mixed = mode in ("allow_mix_precision", "allow_mix_precision_fp16", "allow_mix_precision_bf16")
    if mixed and d == "float32" and not _kept(task):
        return Choice(low, low, low)
    return None


def _kept(task: Task) -> bool:
    node = task.node
    ops = node.meta.get("fused_ops", [task.op]) if node is not None else [task.op]
    return any(op in KEEP_FP32 for op in ops)


def _moved(graph: Graph, task: Task, c: Choice) -> float:
    """The task's bytes with its float tensors at the choice's widths (scaled, so a cost
    rule's own count of what a kernel moves keeps its shape)."""
    before = after = 0
    for names, width in ((task.reads, _WIDTH.get(c.operand)), (task.writes, _WIDTH.get(c.result))):
        for n in names:
            t = graph.values[n].type if n in graph.values else None
            if t is None or not t.is_static:
                continue
            before += t.nbytes
            name = _name(t.dtype) if t.dtype is not None else ""
            after += t.nbytes // _WIDTH[name] * width if name in _WIDTH and width else t.nbytes
    return task.bytes * after / before if before else task.bytes


def apply_precision(graph: Graph, tasks: TaskGraph, runners: dict[int, Runner], mode: str, chip: Chip,
                    device_numerics: bool) -> tuple[TaskGraph, dict[int, Runner]]:
    """The tasks re-typed under ``mode`` (and, for device numerics, their runners wrapped)."""
    out: list[Task] = []
    new_runners = dict(runners)
    for t in tasks.tasks:
        c = choose(t, mode, chip)
        if c is None or (not c.aicpu and c.dtype == c.operand == c.result == t.dtype):
            out.append(t)
            continue
        if c.aicpu:
            out.append(retask(t, kind=TaskKind.AICPU, unit="aicpu", block_dim=1))
            continue
        out.append(retask(t, dtype=c.dtype, bytes=_moved(graph, t, c)))
        if device_numerics and _WIDTH[c.operand] < _WIDTH[t.dtype]:
            new_runners[t.id] = PrecisionRunner(runners[t.id], c.operand, None if c.result == t.dtype else c.result)
    return replace(tasks, tasks=out), new_runners


class Precision(Pass):
    """Re-types each kernel task as ATC's precision mode runs it on the chip."""

    name = "precision"

    def call(self, state: CompileState) -> PassResult:
        opts = state.options
        if opts.precision_numerics not in NUMERICS:
            raise GraphExecError(f"precision_numerics must be 'model' or 'device', not {opts.precision_numerics!r}")
        mode = resolve(opts.precision_mode, state.profile)
        tasks, runners = apply_precision(state.graph, state.need_tasks(), dict(state.runners), mode,
                                         chip_of(state.profile), opts.precision_numerics == "device")
        state.graph.meta["precision"] = {"timed": mode, "computed": mode if opts.precision_numerics == "device"
                                         else "model"}
        return PassResult(replace(state, tasks=tasks, runners=MappingProxyType(runners)), True)

