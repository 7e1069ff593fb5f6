"""The ops of the kernel registry as eager functions: ``npu.ops.relu(x)``, ``npu.ops.conv(x, w, pads=...)``.

Any ONNX op (or registered custom op) runs through the same kernels and cost rules as
graph mode (``_plan.py``): ``npu.ops.run("Conv", x, w, pads=[1, 1, 1, 1])``, or by name in
snake case (``npu.ops.global_average_pool(x)``) or as spelled by ONNX (``npu.ops.Conv``).
Tensor inputs come positionally (None for an omitted optional one), numpy arrays and
numbers become constants of the node, keywords are attributes; ``outputs=N`` for ops
with several outputs. Device ops launch on the current stream and return at once; ops
on host tensors compute at once.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np
from onnx import helper

from graphexec.errors import DeviceError, GraphExecError
from graphexec.kernels.cost import node_cost
from graphexec.npu import _launch, _tensor, _tensor_api
from graphexec.npu._checks import operand
from graphexec.npu._copy import empty_on, span
from graphexec.npu._launch import Kernel, store
from graphexec.npu._plan import FLOAT_BITS, PLANS, attrs_key, cached, plan_for, signature
from graphexec.npu._promote import promote
from graphexec.npu._state import STATE, Card
from graphexec.npu._tensor import _NO_ATTRS, Storage, Tensor
from graphexec.runtime.sim import DeviceTask

_SPELLED = {"matmul": "MatMul", "prelu": "PRelu", "lrn": "LRN", "topk": "TopK", "argmax": "ArgMax",
            "argmin": "ArgMin", "nonzero": "NonZero", "batch_norm": "BatchNormalization",
            "layer_norm": "LayerNormalization", "conv": "Conv", "gemm": "Gemm"}


def run(op: str, *args: Any, outputs: int = 1, **attrs: Any) -> Any:
    """Run ONNX op ``op`` on ``args`` with attributes ``attrs``; a Tensor, or a tuple of them."""
    return run_op(op, list(args), attrs, outputs)


def _card_of(args: list[Any], op: str) -> Card | None:
    """The one card of the tensor arguments (None: all on the host), or a one-line error."""
    card: Card | None = None
    host = False
    for a in args:
        if isinstance(a, Tensor):
            if a._store is None:
                host = True
            elif card is None:
                card = a._store.card
            elif a._store.card is not card:
                raise DeviceError(f"npu.ops.{op}: inputs on {card.name} and {a._store.card.name}; "
                                  "move one with .to()")
    if card is not None and host:
        raise DeviceError(f"npu.ops.{op}: inputs on the host and on {card.name}; move them with .npu() or .cpu()")
    return card


def run_op(op: str, args: list[Any], attrs: dict[str, Any], outputs: int = 1) -> Any:
    """Launch ``op`` on the current stream of its inputs' card (or compute it on the host).

    Every eager op comes through here, so the common case (tensors of one card, a plan
    already built, one output, no capture or hazard checker) takes as few steps as it
    can: the plan key (``_plan.plan_key``'s, built inline) and the card in one loop, the
    output's block, one task; everything else goes the general way.
    """
    key: list[Any] = [op, outputs]
    card = None
    arrs = []
    for a in args:
        t = type(a)
        if t is Tensor:
            arr = a._arr
            key.append(arr.dtype)
            key.append(arr.shape)
            arrs.append(arr)
            held = a._store
            if held is None or (card is not None and held.card is not card):
                return _general(op, args, attrs, outputs)
            card = held.card
        elif t is float:   # signature(a), inline
            key.append(float)
            key.append(a if a == a and a else FLOAT_BITS(a))
        elif isinstance(a, Tensor):   # a subclass: plan_key's key is its dtype and shape
            return _general(op, args, attrs, outputs)
        else:
            operand(a, op)   # npu/_checks.py: at the call, named by its op
            key += signature(a)
    if attrs:
        key.append(attrs_key(attrs))
    return _planned(tuple(key), op, args, attrs, outputs, card, arrs[0] if len(arrs) == 1 else arrs)


def binary(op: str, a: Any, b: Any) -> Any:
    """``run_op(op, [a, b], {})`` for the operators' common cases (``x + 0.5``, ``2 * x``,
    ``x * y``: a device tensor with a Python float or a tensor of its card): the same key,
    made as one tuple; every other case goes through ``run_op``."""
    ta, tb = type(a), type(b)
    if ta is Tensor:
        held = a._store
        if held is not None:
            arr = a._arr
            if tb is float and arr.dtype.kind == "f":
                return _planned((op, 1, arr.dtype, arr.shape, float, b if b == b and b else FLOAT_BITS(b)),
                                op, [a, b], _NO_ATTRS, 1, held.card, arr)
            if tb is Tensor and b._store is not None and b._store.card is held.card and b._arr.dtype == arr.dtype \
                    and (arr.dtype.kind == "f" or op != "Div"):
                other = b._arr
                return _planned((op, 1, arr.dtype, arr.shape, other.dtype, other.shape),
                                op, [a, b], _NO_ATTRS, 1, held.card, [arr, other])
    elif ta is float and tb is Tensor and b._store is not None and b._arr.dtype.kind == "f":
        arr = b._arr
        return _planned((op, 1, float, a if a == a and a else FLOAT_BITS(a), arr.dtype, arr.shape),
                        op, [a, b], _NO_ATTRS, 1, b._store.card, arr)
    return run_op(op, list(promote(op, a, b)), _NO_ATTRS)   # torch's promotion (``_promote.py``)


def _planned(k: tuple[Any, ...], op: str, args: list[Any], attrs: dict[str, Any], outputs: int, card: Card | None,
             ins: Any) -> Any:
    """``op`` under plan key ``k``: one task for the output's new block on the current
    stream of ``card``, reading ``ins`` (the tensor inputs' arrays: one, or a list), where
    that is all it takes; everything else goes the general way."""
    plan = PLANS.get(k)
    if plan is None:
        plan = cached(k, op, args, attrs, outputs)
    else:
        PLANS.move_to_end(k)
    lone = plan.lone   # (dtype, shape) of its one output; None for views, several or value-sized outputs
    if lone is None or card is None or not card.alive or STATE.capture is not None:
        return _general(op, args, attrs, outputs)
    dev = card.device
    if dev.checker is not None:
        return _general(op, args, attrs, outputs)
    stream = card.current
    block = Storage(card, plan.nbytes, stream)
    out = np.ndarray(lone[1], lone[0], block.data, block.offset)
    dev.launch(DeviceTask("kernel", stream, op, plan.unit, plan.block_dim, plan.flops, plan.bytes,
                          plan.dtype, "d2d", None, Kernel(plan, ins, out, card.index), store, plan.meta))
    return Tensor(out, block)


def _general(op: str, args: list[Any], attrs: dict[str, Any], outputs: int) -> Any:
    """Every case: host tensors, views, captures, hazard ranges, several outputs, bad devices."""
    card = _card_of(args, op)
    plan = plan_for(op, args, attrs, outputs)
    tensors = [a for a in args if isinstance(a, Tensor)]
    if card is None:
        values = dict(plan.consts)
        values.update(zip(plan.inputs, (t._arr for t in tensors)))
        res = plan.runner(values, None) if not plan.view else {plan.outputs[0][0]: tensors[0]._arr}
        made = tuple(Tensor(np.array(res[n], dtype=dt) if plan.dynamic else np.array(res[n], dtype=dt).reshape(shape))
                     for n, dt, shape in plan.outputs)   # a shape the values decide is the kernel's own
        return made[0] if outputs == 1 else made
    card.check()
    if plan.view:
        return _view(card, tensors[0], plan.outputs[0][2])
    if plan.dynamic:
        made = _sized_by_values(card, plan, tensors)
        return made[0] if outputs == 1 else made
    outs = [empty_on(card, dt, shape) for _, dt, shape in plan.outputs]
    if STATE.capture is not None:
        for t in tensors:
            STATE.capture.keep(t._store)
    checked = card.device.checker is not None
    ins = [t._arr for t in tensors]
    _launch.kernel(card, card.current, plan, ins[0] if len(ins) == 1 else ins,
                   outs[0]._arr if len(outs) == 1 else [o._arr for o in outs],
                   [span(t, n) for t, n in zip(tensors, plan.inputs)] if checked else (),
                   [span(o, n) for o, (n, _, _) in zip(outs, plan.outputs)] if checked else ())
    return outs[0] if outputs == 1 else tuple(outs)


_tensor.RUN_OP.append(run_op)
_tensor_api.RUN_OP.append(run_op)
_tensor.BINARY.append(binary)


def _sized_by_values(card: Card, plan: Any, tensors: list[Tensor]) -> tuple[Tensor, ...]:
    """An op whose output shapes depend on the values (NonZero, Unique, ...): as torch's nonzero
    does, the host waits for the stream, then the kernel runs as a task of its actual cost,
    its outputs landing at its end."""
    if STATE.capture is not None:
        raise GraphExecError(f"npu.ops.{plan.op}: its output size needs the values, so it cannot be captured "
                             "into an NPUGraph (torch refuses such ops in a capture too)")
    stream = card.current
    with _launch.waiting(card):
        card.device.synchronize_stream(stream)
    _launch.raise_faults(card)
    values = dict(plan.consts)
    values.update(zip(plan.inputs, (t._arr for t in tensors)))
    res = plan.runner(values, None)
    arrays = [np.ascontiguousarray(res[name], dtype=dt) for name, dt, _ in plan.outputs]
    outs = tuple(empty_on(card, a.dtype, a.shape) for a in arrays)
    cost = node_cost(plan.op, [t.shape for t in tensors], sum(t._arr.nbytes for t in tensors),
                     [a.shape for a in arrays], sum(a.nbytes for a in arrays), plan.attrs, plan.unit == "aicpu")
    views = [o._arr for o in outs]

    def store(_: Any) -> None:
        for view, a in zip(views, arrays):
            view[...] = a

    task = DeviceTask("kernel", stream, plan.op, cost.unit, cost.block_dim, cost.flops, cost.bytes, plan.dtype,
                      end_fn=store, meta=plan.meta)
    _launch.submit(card, lambda: card.device.launch(task))
    return outs


def _view(card: Card, t: Tensor, shape: tuple[int, ...]) -> Tensor:
    """A reshape of ``t`` sharing its bytes (a strided view is first copied to contiguous ones)."""
    if not t._arr.flags.c_contiguous:
        t = contiguous(t)
    return Tensor(t._arr.reshape(shape), t._store)


def contiguous(t: Tensor) -> Tensor:
    """A tensor with ``t``'s values in fresh, contiguous bytes (``t`` itself if they already are)."""
    if t._arr.flags.c_contiguous:
        return t
    if t._store is None:
        return Tensor(np.ascontiguousarray(t._arr))
    out = empty_on(t.card(), t.dtype, t.shape)
    out.copy_(t)
    return out


def cast(x: Tensor, dtype: Any) -> Tensor:
    return run_op("Cast", [x], {"to": helper.np_dtype_to_tensor_dtype(np.dtype(dtype))})


def reshape(x: Tensor, shape: Any) -> Tensor:
    return run_op("Reshape", [x, np.asarray(shape, dtype=np.int64)], {})


def _onnx_name(name: str) -> str:
    if name in _SPELLED:
        return _SPELLED[name]
    if name[:1].isupper():
        return name
    return "".join(part.capitalize() for part in name.split("_"))


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    return _caller(name)


@lru_cache(maxsize=256)
def _caller(name: str) -> Any:
    """``npu.ops.<name>``: made once per name (a loop calling ``npu.ops.relu`` looks it up each time)."""
    op = _onnx_name(name)

    def call(*args: Any, outputs: int = 1, **attrs: Any) -> Any:
        return run_op(op, list(args), attrs, outputs)

    call.__name__ = call.__qualname__ = name
    return call
