"""One eager op as graph mode would run it: typed, lowered and costed once per signature.

An op on tensors of given dtypes and shapes (and given attributes) becomes a one-node
graph built with the GraphBuilder (which checks and types it) and lowered by graph
mode's own Lowering: the same NodeRunner (kernel or fallback), the same cost rule, unit,
block dim and compute dtype. The plan is kept per signature, so a loop of the same op
pays for this once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from graphexec.errors import GraphError, GraphExecError
from graphexec.frontend.builder import GraphBuilder
from graphexec.npu._tensor import Tensor
from graphexec.passes.lowering import lower

PLANS: dict[Any, "OpPlan"] = {}


@dataclass(frozen=True, slots=True)
class OpInfo:
    """What the profile's op rows and the trace read of an eager kernel (``meta["task"]``)."""

    op: str
    node: Any = None
    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class OpPlan:
    """How to launch one op signature: ``view`` ops alias input 0 and launch nothing."""

    op: str
    inputs: tuple[str, ...]                 # value names of the tensor inputs, in order
    consts: tuple[tuple[str, Any], ...]     # scalars and arrays folded into the node
    outputs: tuple[tuple[str, np.dtype, tuple[int, ...]], ...]
    runner: Any
    unit: str
    flops: float
    bytes: float
    block_dim: int
    dtype: str
    view: bool
    info: OpInfo
    nbytes: int = 0                         # bytes of the first output
    meta: dict[str, Any] = field(default_factory=dict)   # the device tasks' meta, shared: read only
    dynamic: bool = False                   # an output's shape depends on the values
    attrs: dict[str, Any] = field(default_factory=dict)


def signature(x: Any) -> Any:
    """What a plan depends on of a non-tensor argument: a constant's value (arrays by bytes)."""
    return ("const", type(x), _frozen(x))


def attrs_key(attrs: dict[str, Any]) -> Any:
    return tuple(sorted((k, _frozen(v)) for k, v in attrs.items()))


def _frozen(v: Any) -> Any:
    """``v`` as a hashable key: arrays by dtype, shape and bytes, lists and dicts as tuples."""
    if isinstance(v, np.ndarray):
        return ("array", v.dtype, v.shape, v.tobytes())
    if isinstance(v, (list, tuple)):
        return tuple(_frozen(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((k, _frozen(x)) for k, x in v.items()))
    return v


def plan_key(op: str, args: list[Any], attrs: dict[str, Any], outputs: int) -> tuple[Any, ...]:
    """The cache key of a plan: op, output count, each tensor's dtype and shape, each constant,
    the attributes (``ops.run_op`` builds the same key inline)."""
    key: list[Any] = [op, outputs]
    for a in args:
        if isinstance(a, Tensor):
            key += (a._arr.dtype, a._arr.shape)
        else:
            key.append(signature(a))
    if attrs:
        key.append(attrs_key(attrs))
    return tuple(key)


def plan_for(op: str, args: list[Any], attrs: dict[str, Any], n_out: int) -> OpPlan:
    """The cached plan of ``op`` on ``args`` (tensors, Python numbers, arrays, None)."""
    key = plan_key(op, args, attrs, n_out)
    plan = PLANS.get(key)
    if plan is None:
        plan = PLANS[key] = _build(op, args, attrs, n_out)
    return plan


def _build(op: str, args: list[Any], attrs: dict[str, Any], n_out: int) -> OpPlan:
    b = GraphBuilder(f"eager {op}")
    ins: list[Any] = []
    names: list[str] = []
    for i, a in enumerate(args):
        if isinstance(a, Tensor):
            ins.append(b.input(f"x{i}", a.dtype, list(a.shape)))
            names.append(f"x{i}")
        else:
            ins.append(a)
    try:
        outs = b.op(op, *ins, outputs=n_out, **attrs)
    except GraphError as e:
        raise GraphError(f"npu.ops.{op.lower()}: {_one_line(e)}") from None
    outs = outs if isinstance(outs, tuple) else (outs,)
    b.output(*outs)
    graph = b.build()
    typed: list[tuple[str, np.dtype, tuple[int, ...]]] = []
    dynamic = False
    for o in outs:
        t = graph.values[o.name].type
        if t.dtype is None or t.kind != "tensor" or t.dtype == np.dtype(object):
            raise GraphExecError(f"npu.ops.{op.lower()}: its output {o.name} is {t}, not a tensor eager mode "
                                 "can place on a device")
        dynamic = dynamic or not t.is_static   # sized by the values (NonZero, Unique): see ops._sized_by_values
        typed.append((o.name, t.dtype, tuple(d for d in t.shape or () if isinstance(d, int))))
    tasks, runners = lower(graph)
    consts = tuple((n, v.const) for n, v in graph.values.items() if v.const is not None)
    info = OpInfo(op, None, tuple(names), tuple(n for n, _, _ in typed))
    if not tasks.tasks:   # a pure view (Reshape, Squeeze, ...): graph mode launches nothing either
        return OpPlan(op, tuple(names), consts, tuple(typed), None, "", 0.0, 0.0, 1, "", True, info)
    task = tasks.tasks[0]
    _, dt, shape = typed[0]
    return OpPlan(op, tuple(names), consts, tuple(typed), runners[task.id], task.unit, task.flops, task.bytes,
                  task.block_dim, task.dtype, False, info, math.prod(shape) * dt.itemsize, {"task": info}, dynamic,
                  dict(attrs))


def _one_line(e: Exception) -> str:
    text = str(e).replace("<builder>: ", "").replace("builder 'eager ", "'")
    return " ".join(text.split())
