"""Host fusion: a chain that lives in one buffer is computed once, by its first task.

In-place outputs (``passes/inplace.py``) put a chain such as Conv -> BatchNormalization
-> Mul -> Add -> Relu in one buffer whose values only the chain reads. Its per-channel
affine steps compose into one ``x * K + S``: folded into the filter and bias when the
chain starts at a Conv with constant weights (as onnxruntime folds BatchNormalization),
else applied by the chain's first affine task as two passes; a final Relu follows at
once. The other tasks of the chain find their values already in place and skip the
math. Only the host's numpy work changes: every task is still launched and simulated,
times, memory and traces are the same, and outputs differ from step-by-step rounding
by a few float32 ulps of the scaled value (a scale after a shift is not folded, see
``_chain``).
"""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType
from typing import Any, Mapping, cast

import numpy as np

from graphexec.ir import Graph, Node
from graphexec.kernels.dispatch import NodeRunner
from graphexec.kernels.elementwise import relu
from graphexec.kernels.registry import Unsupported
from graphexec.passes.base import CompileState, Pass, PassResult
from graphexec.plan.tasks import Runner, Task, TaskGraph

_F32 = np.dtype(np.float32)
Affine = tuple[np.ndarray, np.ndarray]    # (K, S), each of shape (C,)
_SHIFTS = ("Add", "Sub")


def fuse_chains(graph: Graph, tasks: TaskGraph, runners: Mapping[int, Runner]) -> tuple[dict[int, Runner], int]:
    """The runners with each foldable chain's fused in, and how many tasks skip their math.

    A chain needs an affine step after its head (a Conv with constant weights, or an
    affine task): a head followed by Relu alone gains nothing over the plain kernels."""
    writer = {t.writes[0]: t for t in tasks.tasks if len(t.writes) == 1}
    follower = {x: writer[y] for y, x in tasks.inplace.items()}
    out = dict(runners)
    skipped = 0
    for head in tasks.tasks:
        plain = out.get(head.id)
        if not isinstance(plain, NodeRunner) or len(head.writes) != 1:
            continue
        steps, relu, members = _chain(graph, head, follower)
        folded = _fold(graph, head, steps)
        if folded is None:
            continue
        conv, affine = folded
        if conv is not None:
            out[head.id] = FusedConv(plain, conv, affine, relu)
        else:
            out[head.id] = FusedAffine(_node(head).inputs[0], head.writes[0], affine, relu)
        for m in members:
            out[m.id] = Done()
        skipped += len(members)
    return out, skipped


class HostFusion(Pass):
    """Gives the tasks of each chain that lives in one buffer a fused runner."""

    name = "fusion"

    def call(self, state: CompileState) -> PassResult:
        runners, fused = fuse_chains(state.graph, state.need_tasks(), state.runners)
        return PassResult(replace(state, runners=MappingProxyType(runners), fused=fused), fused > 0)


def _fold(graph: Graph, head: Task, steps: list[Affine]) -> tuple[Any, Affine] | None:
    """(the head's Conv weights or None, the composed affine) of a chain, or None: no steps,
    a head that is neither a foldable Conv nor affine, or a composition that overflows."""
    if not steps:
        return None
    conv = _conv_weights(graph, head)
    if conv is None:
        inputs = _node(head).inputs
        first = _affine(graph, head, inputs[0]) if inputs else None
        if first is None:
            return None
        steps = [first] + steps
    affine = _compose(steps)
    return None if affine is None else (conv, affine)


def _chain(graph: Graph, head: Task, follower: dict[str, Task]) -> tuple[list[Affine], bool, list[Task]]:
    """The affine steps (and a final Relu) that follow ``head`` in place, and their tasks.

    A scaling step after a pure shift (Add, Sub) ends the chain: (x - c) * k rounds
    x - c first, which is exact near c, while x*k - c*k would round x*k and lose the
    difference (cancellation); a scale after a scale, or a shift after either, rounds
    at the same magnitude both ways."""
    steps: list[Affine] = []
    members: list[Task] = []
    value, shifted = head.writes[0], head.op in _SHIFTS
    while value in follower:
        t = follower[value]
        if t.op == "Relu" and not _node(t).domain and graph.values[value].type.dtype == _F32:
            members.append(t)
            return steps, True, members
        step = _affine(graph, t, value)
        if step is None or (shifted and not (step[0] == 1).all()):
            break
        shifted = shifted or t.op in _SHIFTS
        steps.append(step)
        members.append(t)
        value = t.writes[0]
    return steps, False, members


def _compose(steps: list[Affine]) -> Affine | None:
    """x*K1+S1, then *K2+S2, ... as one x*K+S; None when that overflows (step by step the
    values may stay finite)."""
    k, s = steps[0]
    with np.errstate(all="ignore"):
        for k2, s2 in steps[1:]:
            k, s = k * k2, s * k2 + s2
    return (k, s) if np.isfinite(k).all() and np.isfinite(s).all() else None


def _affine(graph: Graph, task: Task, src: str) -> Affine | None:
    """(K, S) when ``task`` maps its input ``src`` to src*K+S per channel (axis 1), all float32
    and finite (an infinity would turn the composed shift into NaN)."""
    with np.errstate(all="ignore"):
        step = _step(graph, task, src)
    return step if step is not None and np.isfinite(step[0]).all() and np.isfinite(step[1]).all() else None


def _step(graph: Graph, task: Task, src: str) -> Affine | None:
    node, t = _node(task), graph.values[src].type
    shape = cast("tuple[int, ...]", t.shape)  # only read once t.is_static holds: every dim is an int
    if node.domain or not t.is_static or t.dtype != _F32 or len(shape) < 2 or len(task.writes) != 1 \
            or node.inputs.count(src) != 1:
        return None
    channels, rank = shape[1], len(shape)
    maybe = [_f32_const(graph, n) for n in node.inputs if n != src]
    others = [c for c in maybe if c is not None]
    if len(others) != len(maybe):   # an input that is not a float32 constant
        return None
    if node.op == "BatchNormalization":
        if graph.opsets.get("", 1) < 9 or node.attrs.get("training_mode", 0) or len(others) != 4 \
                or any(c.shape != (channels,) for c in others):
            return None
        scale, b, mean, var = others
        k = scale / np.sqrt(var + _F32.type(node.attrs.get("epsilon", 1e-5)))
        return k, b - mean * k
    c = _per_channel(others[0], channels, rank) if len(others) == 1 else None
    if c is None:
        return None
    one, zero, first = np.ones(channels, _F32), np.zeros(channels, _F32), node.inputs[0] == src
    table = {"Mul": (c, zero), "Add": (one, c), "Sub": (one, -c) if first else None,
             "Div": (one / c, zero) if first and c.all() else None}
    return table.get(node.op)


def _node(task: Task) -> Node:
    """The IR node of a task; lowering gives every task it makes one (fusion sees no others)."""
    assert task.node is not None
    return task.node


def _f32_const(graph: Graph, name: str) -> np.ndarray | None:
    v = graph.values.get(name) if name else None
    c = None if v is None else v.const
    return c if isinstance(c, np.ndarray) and c.dtype == _F32 else None


def _per_channel(c: np.ndarray, channels: int, rank: int) -> np.ndarray | None:
    """A constant that broadcasts as one number per channel (axis 1) of a rank-``rank``
    tensor, as a (C,) array; None when it varies along another axis."""
    if c.ndim > rank:
        return None
    shape = (1,) * (rank - c.ndim) + c.shape
    if any(d != 1 for i, d in enumerate(shape) if i != 1) or shape[1] not in (1, channels):
        return None
    return np.broadcast_to(c.reshape(-1), (channels,)).copy()


def _conv_weights(graph: Graph, task: Task) -> tuple[np.ndarray, np.ndarray | None] | None:
    """(W, bias) of a 2-D float32 Conv whose filter and bias are constants."""
    node = _node(task)
    if node.op != "Conv" or node.domain or len(node.inputs) < 2:
        return None
    w = graph.values[node.inputs[1]].const
    b = graph.values[node.inputs[2]].const if len(node.inputs) > 2 and node.inputs[2] else None
    if not isinstance(w, np.ndarray) or w.dtype != _F32 or w.ndim != 4 \
            or graph.values[node.inputs[0]].type.dtype != _F32:
        return None
    if len(node.inputs) > 2 and node.inputs[2] and not isinstance(b, np.ndarray):
        return None
    return w, b


class FusedConv:
    """A Conv computed with the chain's affine folded into its filter and bias, then Relu."""

    def __init__(self, plain: NodeRunner, conv: tuple[np.ndarray, np.ndarray | None], affine: Affine,
                 relu: bool) -> None:
        (w, b), (k, s) = conv, affine
        self.plain, self.relu, self.k, self.s = plain, relu, k, s
        self.w = w * k.reshape(-1, 1, 1, 1)
        self.b = (s if b is None else b * k + s).astype(_F32)
        self.ctx = replace(plain.ctx, const_inputs=(False, True, True), cache={})   # its own transformed filters
        self.x, self.y = plain.node.inputs[0], plain.node.outputs[0]

    def __call__(self, values: dict[str, Any], out: Any = None) -> dict[str, Any]:
        fn = self.plain.fn
        try:
            if fn is None or self.plain.uses_fallback:
                raise Unsupported("Conv: the reference computes this one")
            y = fn(self.ctx, values[self.x], self.w, self.b, out=out) if self.plain.takes_out \
                else fn(self.ctx, values[self.x], self.w, self.b)
        except (Unsupported, ValueError, TypeError, LookupError, ArithmeticError):
            # step by step: the plain Conv (its fallback, or its one-line KernelError), then the affine
            y = self.plain(values, out)[self.y]
            with np.errstate(all="ignore"):
                y *= self.k.reshape(-1, 1, 1)
                y += self.s.reshape(-1, 1, 1)
        if self.relu:
            relu(y, out=y)
        return {self.y: y}


class FusedAffine:
    """x*K+S per channel (then Relu) for a chain of affine steps.

    When K and S each hold one value for every channel (bit for bit: a learned scalar scale,
    as in PP-OCR's activations), they are applied as one-element operands: numpy then runs
    its scalar loop over the whole tensor, where a (C, 1, 1) operand against runs shorter
    than its buffer goes through the buffered loop (1x240x12x40: 52 -> 12 us). Every element
    gets the same multiply and add either way; a NaN K or S keeps the per-channel path, since
    which NaN comes out of two NaN operands differs between numpy's loops."""

    def __init__(self, x: str, y: str, affine: Affine, relu: bool) -> None:
        self.x, self.y, (self.k, self.s), self.relu = x, y, affine, relu
        self.uniform = _uniform(self.k) and _uniform(self.s) and not (np.isnan(self.k[:1]) | np.isnan(self.s[:1])).any()

    def __call__(self, values: dict[str, Any], out: Any = None) -> dict[str, Any]:
        x = values[self.x]
        if self.uniform and x.ndim:
            k, s = self.k[:1].reshape((1,) * x.ndim), self.s[:1].reshape((1,) * x.ndim)
        else:
            shape = (-1,) + (1,) * (x.ndim - 2)
            k, s = self.k.reshape(shape), self.s.reshape(shape)
        y = out if out is not None and out.shape == x.shape and out.dtype == x.dtype else np.empty_like(x)
        with np.errstate(all="ignore"):   # as the plain kernels: IEEE results, no warnings
            np.multiply(x, k, out=y)
            y += s
        if self.relu:
            relu(y, out=y)
        return {self.y: y}


def _uniform(v: np.ndarray) -> bool:
    """Whether every element of ``v`` has the same bits (+0 and -0 differ, NaNs may too)."""
    bits = np.ascontiguousarray(v).view(np.uint8).reshape(v.size, -1) if v.size else v
    return bool(v.size) and bool((bits == bits[:1]).all())


class Done:
    """A chain member whose value its chain's first task already wrote in place."""

    uses_fallback = False

    def __call__(self, values: dict[str, Any], out: Any = None) -> dict[str, Any]:
        return {}
