"""One eager op as graph mode would run it: typed, lowered and costed once per signature.

An op on tensors of given dtypes and shapes (and given attributes) becomes a one-node
graph built with the GraphBuilder (which checks and types it) and lowered by graph
mode's own Lowering: the same NodeRunner (kernel or fallback), the same cost rule, unit,
block dim and compute dtype. The plan is kept per signature, so a loop of the same op
pays for this once. Constants are part of the signature (they are folded into the node),
so ``x * i`` over many ``i`` builds many plans: the cache keeps the ``PLAN_CACHE_SIZE``
most recently used ones (an LRU), rebuilding any other when it comes back.
"""

from __future__ import annotations

import math
import struct
from collections import OrderedDict
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Callable

import numpy as np

from graphexec.errors import GraphError, GraphExecError
from graphexec.frontend.builder import GraphBuilder
from graphexec.kernels.dispatch import NodeRunner
from graphexec.npu._checks import operand
from graphexec.npu._tensor import Tensor
from graphexec.passes.lowering import lower
from graphexec.profiling.summary import tensor_cells

PLAN_CACHE_SIZE = 1024   # plans kept: a model's eager ops have far fewer signatures
PLANS: OrderedDict[Any, "OpPlan"] = OrderedDict()   # key -> plan, least recently used first
FLOAT_BITS = struct.Struct("<d").pack   # a float's 8 bytes: tells -0.0 from 0.0 and one NaN from another


@dataclass(frozen=True, slots=True)
class OpInfo:
    """What the profile's op rows and the trace read of an eager kernel (``meta["task"]``)."""

    op: str
    node: Any = None
    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    tensors: tuple[str, str, str, str] = ("", "", "", "")   # msprof's input/output shape and dtype cells


@dataclass(frozen=True, slots=True)
class Direct:
    """A kernel called without its NodeRunner's dict of values: ``call(ins)`` is
    ``runner.fn(runner.ctx, *the node's arguments)``, ``ins`` the tensor inputs as the
    launch holds them (one array, or a list)."""

    runner: NodeRunner                      # its ``uses_fallback`` turns this off, as it does the runner's kernel
    call: Callable[[Any], Any]
    ufunc: Callable[[Any], Any] | None = None   # the one elementwise ufunc its bind calls (``_ufunc``)


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
    direct: Direct | None = None            # the kernel's own function, where the runner has one
    lone: tuple[np.dtype, tuple[int, ...]] | None = None   # its one output's dtype and shape: a plain launch


def signature(x: Any) -> tuple[Any, Any]:
    """The two key items of a non-tensor argument (a tensor's are its dtype and shape): the
    constant's type and value, exact to the bit (arrays by bytes; -0.0 is not 0.0, NaN is NaN).

    The first item is a type or "const", never a dtype, and the second never a tuple where
    the first is a type, so no argument's items equal a tensor's (numpy's dtype equals
    ``float`` and even ``None``; a shape never equals a number).
    """
    t = type(x)
    if t is float:
        return float, (x if x == x and x else FLOAT_BITS(x))
    if t is int or t is bool:
        return t, x
    operand(x, "an op")   # checked here, at the call: a bad one failed the kernel, seen at the next op
    return "const", _frozen(x)


def attrs_key(attrs: dict[str, Any]) -> Any:
    return tuple(sorted((k, _frozen(v)) for k, v in attrs.items()))


def _frozen(v: Any) -> Any:
    """``v`` as a hashable key, typed, exact to the bit: arrays by dtype, shape and bytes,
    lists and dicts as tuples."""
    if isinstance(v, np.ndarray):
        return ("array", v.dtype, v.shape, v.tobytes())
    if isinstance(v, (list, tuple)):
        return (type(v), tuple(_frozen(x) for x in v))
    if isinstance(v, dict):
        return (dict, tuple(sorted((k, _frozen(x)) for k, x in v.items())))
    if isinstance(v, float):
        return (type(v), FLOAT_BITS(v))
    if isinstance(v, np.generic):
        return (type(v), v.tobytes())
    return (type(v), v)


def plan_key(op: str, args: list[Any], attrs: dict[str, Any], outputs: int) -> tuple[Any, ...]:
    """The cache key of a plan: op, output count, two items per argument (a tensor's dtype
    and shape, a constant's ``signature``), the attributes (``ops.run_op`` builds the same
    key inline)."""
    key: list[Any] = [op, outputs]
    for a in args:
        if isinstance(a, Tensor):
            key += (a._arr.dtype, a._arr.shape)
        else:
            key += signature(a)
    if attrs:
        key.append(attrs_key(attrs))
    return tuple(key)


def plan_for(op: str, args: list[Any], attrs: dict[str, Any], n_out: int) -> OpPlan:
    """The cached plan of ``op`` on ``args`` (tensors, Python numbers, arrays, None)."""
    return cached(plan_key(op, args, attrs, n_out), op, args, attrs, n_out)


def cached(key: tuple[Any, ...], op: str, args: list[Any], attrs: dict[str, Any], n_out: int) -> OpPlan:
    """The plan under ``key`` (now the most recently used), built and kept if missing; the
    least recently used one goes when the cache is full."""
    plan = PLANS.get(key)
    if plan is not None:
        PLANS.move_to_end(key)
        return plan
    plan = PLANS[key] = _build(op, args, attrs, n_out)
    while len(PLANS) > PLAN_CACHE_SIZE:
        PLANS.popitem(last=False)
    return plan


def _snapshot(v: Any) -> Any:
    """``v`` with its arrays copied and read-only: the plan keeps the bytes its key was made
    of, whatever the caller does to its array afterwards (a cached plan, an in-flight launch)."""
    if isinstance(v, np.ndarray):
        out = v.copy()
        out.setflags(write=False)
        return out
    if isinstance(v, (list, tuple)):
        return type(v)(_snapshot(x) for x in v)
    if isinstance(v, dict):
        return {k: _snapshot(x) for k, x in v.items()}
    return v


def _build(op: str, args: list[Any], attrs: dict[str, Any], n_out: int) -> OpPlan:
    args, attrs = [a if isinstance(a, Tensor) else _snapshot(a) for a in args], _snapshot(attrs)
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
    info = OpInfo(op, None, tuple(names), tuple(n for n, _, _ in typed),
                  (*tensor_cells(graph, names), *tensor_cells(graph, [n for n, _, _ in typed])))
    if not tasks.tasks:   # a pure view (Reshape, Squeeze, ...): graph mode launches nothing either
        return OpPlan(op, tuple(names), consts, tuple(typed), None, "", 0.0, 0.0, 1, "", True, info)
    task = tasks.tasks[0]
    _, dt, shape = typed[0]
    runner = runners[task.id]
    direct = _direct(runner, names, dict(consts), [(a.dtype, a.shape) for a in args if isinstance(a, Tensor)]) \
        if len(typed) == 1 else None
    return OpPlan(op, tuple(names), consts, tuple(typed), runner, task.unit, task.flops, task.bytes,
                  task.block_dim, task.dtype, False, info, math.prod(shape) * dt.itemsize, {"task": info}, dynamic,
                  dict(attrs), direct, None if dynamic or len(typed) != 1 else (dt, shape))


def _direct(runner: Any, names: list[str], consts: dict[str, Any],
            inputs: list[tuple[np.dtype, tuple[int, ...]]]) -> Direct | None:
    """The kernel function of a one-output NodeRunner with the node's arguments in order,
    given the launch's inputs (one array when there is one tensor input, else a list)."""
    if type(runner) is not NodeRunner or runner.fn is None or runner.uses_fallback or len(runner.node.outputs) != 1:
        return None
    spec: list[tuple[int, Any]] = []   # per node input: (-1, its constant or None) or (tensor index, None)
    for name in runner.node.inputs:
        if name in names:
            spec.append((names.index(name), None))
        elif not name or name in consts:
            spec.append((-1, consts.get(name) if name else None))
        else:
            return None
    template = tuple(v for _, v in spec)
    slots = [(pos, k) for pos, (k, _) in enumerate(spec) if k >= 0]
    fn, ctx = runner.fn, runner.ctx
    call: Callable[[Any], Any]
    if not slots:
        call = lambda ins: fn(ctx, *template)   # noqa: E731
    elif len(names) == 1 and len(template) == 1:
        call = lambda ins: fn(ctx, ins)   # noqa: E731
    elif len(names) == 1 and len(template) == 2:   # x + 0.5, 2 * x: the operators' common case
        c = template[1 - slots[0][0]]
        call = (lambda ins: fn(ctx, ins, c)) if slots[0][0] == 0 else (lambda ins: fn(ctx, c, ins))
    elif [k for _, k in slots] == list(range(len(template))):   # every argument a tensor, in order
        call = lambda ins: fn(ctx, *ins)   # noqa: E731
    else:
        call = partial(_fill, fn, ctx, template, slots, len(names) == 1)
    return Direct(runner, call, _ufunc(runner, template, slots, inputs) if len(names) == 1 else None)


def _ufunc(runner: NodeRunner, template: tuple[Any, ...], slots: list[tuple[int, int]],
           inputs: list[tuple[np.dtype, tuple[int, ...]]]) -> Callable[[Any], Any] | None:
    """The kernel of a one-tensor op as the elementwise ufunc its ``bind`` calls on an array of
    the input's dtype and shape (the registry's contract: exactly what the kernel returns,
    with numpy's warnings off), the input in its place: ``x + 0.5`` is ``np.add(x, c)``
    without the kernel's checks, which the plan's signature has settled. None where the
    bind is anything else: a function, a ufunc with a core signature (matmul), other
    keywords than an empty ``out``, or no bind."""
    if runner.bind is None or len(slots) != 1:
        return None
    (pos, _), (dtype, shape) = slots[0], inputs[0]
    sample = np.zeros(shape, dtype)
    args = list(template)
    args[pos] = sample
    try:
        made = runner.bind(runner.ctx, *args)
    except Exception:  # noqa: BLE001  (a bind that refuses by raising: no shortcut)
        return None
    if type(made) is not partial or not isinstance(made.func, np.ufunc) or made.func.signature is not None \
            or made.keywords not in ({}, {"out": None}) or pos >= len(made.args) or made.args[pos] is not sample:
        return None
    f, before, after = made.func, made.args[:pos], made.args[pos + 1:]
    if not before and len(after) == 1:   # x + 0.5
        c = after[0]
        return lambda ins: f(ins, c)
    if len(before) == 1 and not after:   # 2 * x
        c = before[0]
        return lambda ins: f(c, ins)
    return lambda ins: f(*before, ins, *after)


def _fill(fn: Callable[..., Any], ctx: Any, template: tuple[Any, ...], slots: list[tuple[int, int]], single: bool,
          ins: Any) -> Any:
    vals = list(template)
    for pos, k in slots:
        vals[pos] = ins if single else ins[k]
    return fn(ctx, *vals)


def _one_line(e: Exception) -> str:
    text = str(e).replace("<builder>: ", "").replace("builder 'eager ", "'")
    return " ".join(text.split())
