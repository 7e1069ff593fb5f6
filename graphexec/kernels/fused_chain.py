"""A fused node's per-element tail, a block of channels at a time (the replay fast path).

A fused group such as Conv+Relu, Conv+Sum+Relu, DenseNet's BatchNormalization+Mul+Add+Relu
or PP-LCNet's HardSwish written out (Add+Clip+Mul+Div+Mul+Add) ran member after member, each
a pass over the whole tensor: a big tensor went through memory once per step (the conv's
bias, BatchNormalization's scale and shift, each Mul, Add, Clip and Relu). Here the steps
after the head (a Conv, computed whole, without its bias) run on a block of whole channels
at a time, every step on the block while it is in cache, so the tensor crosses memory once.
Each element goes through the same IEEE operations (the bias add, x*k then +shift, each
binary op with its operand on the same side, max with 0, np.clip) in the same order, so the
result is bit for bit the member-by-member run's, ``fused._run_bound``, which stays as the
plain path (``GRAPHEXEC_PLAIN``; and whatever this module does not recognise).
"""

from __future__ import annotations

from functools import partial
from typing import Any, Callable, Mapping, cast

import numpy as np

from graphexec import _switch
from graphexec.kernels import nn, scratch
from graphexec.kernels.dispatch import NodeRunner
from graphexec.kernels.quiet import is_quiet

BLOCK_ELEMS = 1 << 15   # elements per block (128 KiB of float32): every step's operands stay in L2
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
_BINARY = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide, "Sum": np.add}
_RELU = None   # the Relu step's marker: max with a zero block


class Step:
    """One per-element step: ``ufunc(block, operand)`` (``first``: ``ufunc(operand, block)``);
    the operand is per channel (C, 1), a 0-d scalar, a whole tensor viewed (N, C, L), or
    the Relu marker; ``bound``: Clip's upper bound (``np.clip(block, operand, bound)``)."""

    __slots__ = ("ufunc", "operand", "first", "whole", "bound")

    def __init__(self, ufunc: Any, operand: Any, first: bool = False, whole: bool = False,
                 bound: Any = None) -> None:
        self.ufunc, self.operand, self.first, self.whole, self.bound = ufunc, operand, first, whole, bound

    def block(self, n: int, c0: int, c1: int) -> Any:
        """The operand's part that meets the block of channels c0..c1 of image n."""
        if self.whole:
            return self.operand[n, c0:c1]
        return self.operand[c0:c1] if self.operand.ndim == 2 else self.operand


def bind(members: list[NodeRunner], outputs: list[str], values: Mapping[str, Any],
         out: Any) -> Callable[[], dict[str, Any]] | None:
    """The fused node's run as head + blocked tail, on the fixed ``values`` and ``out``; None
    where the group is not such a chain (the caller keeps the member-by-member run)."""
    if not _switch.FAST or out is None or len(outputs) != 1 or type(out) is not np.ndarray \
            or out.dtype not in _FLOATS or out.ndim < 3 or not out.flags.c_contiguous \
            or outputs[0] != members[-1].single:
        return None
    head = members[0]
    steps: list[Step] = []
    if head.node.op == "Conv" and head.fn is not None and not head.uses_fallback:
        start = _conv_head(head, values, out, steps)
        tail, src = members[1:], None
    else:
        start, tail = None, members
        src = _main_input(head, values, out)
    if (start is None and src is None) or not tail:
        return None
    prev = head.single if start is not None else head.node.inputs[0]
    for r in tail:
        if r.fn is None or r.uses_fallback or r.single is None or not _step(r, prev, values, out, steps):
            return None
        prev = r.single
    if len(steps) < 2:   # one step: the member's own kernel is as good
        return None
    return partial(_run, start, src, steps, out, outputs[0])


def _conv_head(r: NodeRunner, values: Mapping[str, Any], out: np.ndarray,
               steps: list[Step]) -> Callable[[], Any] | None:
    """The conv computed into ``out`` without its bias, which becomes the first step."""
    names = r.node.inputs
    if len(names) < 2 or any(n and n not in values for n in names):
        return None
    x, w = values[names[0]], values[names[1]]
    b = values[names[2]] if len(names) > 2 and names[2] else None
    if type(x) is not np.ndarray or type(w) is not np.ndarray or x.dtype != out.dtype or w.dtype != out.dtype \
            or x.ndim != out.ndim or r.fn is None:
        return None
    if b is not None:
        if b.dtype != out.dtype or b.shape != (out.shape[1],):
            return None
        steps.append(Step(np.add, b.reshape(-1, 1)))
    return partial(r.fn, r.ctx, x, w, None, out=out)


def _main_input(r: NodeRunner, values: Mapping[str, Any], out: np.ndarray) -> np.ndarray | None:
    """The tensor a head-less chain starts from: the first member's first input, of the output's shape."""
    n = r.node.inputs[0] if r.node.inputs else ""
    x = values.get(n) if n else None
    if type(x) is not np.ndarray or x.shape != out.shape or x.dtype != out.dtype:
        return None
    return x


def _step(r: NodeRunner, prev: str | None, values: Mapping[str, Any], out: np.ndarray,
          steps: list[Step]) -> bool:
    """Append member ``r``'s steps; False where it is not a per-element step on the chain's
    running value ``prev`` (the previous member's output, or the head-less chain's main input)."""
    op, names, ctx = r.node.op, r.node.inputs, r.ctx
    if op == "Relu":
        ok = len(names) == 1 and _is_main(names[0], prev)
        if ok:
            steps.append(Step(np.maximum, _RELU))
        return ok
    if op == "BatchNormalization":
        return _batchnorm(r, prev, values, out, steps)
    if op == "Clip":
        return _clip(r, prev, values, out, steps)
    ufunc = _BINARY.get(op)
    if ufunc is None or len(names) != 2 or ctx.opset < (8 if op == "Sum" else 7) \
            or r.node.domain not in ("", "ai.onnx"):
        return False
    mine = [_is_main(n, prev) for n in names]
    if mine.count(True) != 1:
        return False
    other = values.get(names[mine.index(False)])
    operand = _operand(other, out)
    if operand is None:
        return False
    steps.append(Step(ufunc, operand[0], first=not mine[0], whole=operand[1]))
    return True


def _is_main(name: str, prev: str | None) -> bool:
    """Whether input ``name`` is the chain's running value."""
    return bool(name) and name == prev


def _operand(v: Any, out: np.ndarray) -> tuple[np.ndarray, bool] | None:
    """(operand, whole) of a binary step's other input: a whole tensor of the output's shape as
    (N, C, L), a per-channel one as (C, 1), a single value as 0-d; None for anything else."""
    if type(v) is not np.ndarray or v.dtype != out.dtype:
        return None
    if v.shape == out.shape:
        return (v.reshape(out.shape[0], out.shape[1], -1), True) if v.flags.c_contiguous else None
    if v.size == 1 and v.ndim <= out.ndim:
        return v.reshape(()), False
    if v.ndim > out.ndim or v.ndim < out.ndim - 1:
        return None
    shape = (1,) * (out.ndim - v.ndim) + v.shape
    if shape[0] != 1 or shape[1] != out.shape[1] or any(d != 1 for d in shape[2:]):
        return None
    return v.reshape(-1, 1), False


def _clip(r: NodeRunner, prev: str | None, values: Mapping[str, Any], out: np.ndarray,
          steps: list[Step]) -> bool:
    """Clip-11+ with both bounds given as scalars of the dtype: ``np.clip``, as its kernel."""
    names = r.node.inputs
    if r.ctx.opset < 11 or len(names) != 3 or not _is_main(names[0], prev) or not names[1] or not names[2]:
        return False
    lo, hi = values.get(names[1]), values.get(names[2])
    if any(type(b) is not np.ndarray or b.size != 1 or b.dtype != out.dtype for b in (lo, hi)):
        return False
    steps.append(Step(np.clip, lo.reshape(()), bound=hi.reshape(())))   # type: ignore[union-attr]
    return True


def _batchnorm(r: NodeRunner, prev: str | None, values: Mapping[str, Any], out: np.ndarray,
               steps: list[Step]) -> bool:
    """BatchNormalization as its kernel computes it, x * k then + shift (``nn._bn_coefficients``)."""
    names, ctx = r.node.inputs, r.ctx
    if len(names) != 5 or not _is_main(names[0], prev) or ctx.opset < 9 or ctx.num_outputs != 1 \
            or ctx.attr("training_mode", 0):
        return False
    given = [values.get(n) for n in names[1:]]
    if any(type(p) is not np.ndarray or p.dtype != out.dtype or p.shape != (out.shape[1],) for p in given):
        return False
    params = cast(list[np.ndarray], given)
    k, shift = nn._bn_coefficients(ctx, out.dtype, out.ndim, *params)
    steps += [Step(np.multiply, k.reshape(-1, 1)), Step(np.add, shift.reshape(-1, 1))]
    return True


def _run(start: Callable[[], Any] | None, src: np.ndarray | None, steps: list[Step], out: np.ndarray,
         name: str) -> dict[str, Any]:
    """The head, then every step block by block; the result is ``out`` (or the head's own array)."""
    y = out if start is None else start()
    if type(y) is not np.ndarray or y.shape != out.shape or not y.flags.c_contiguous:
        y = np.ascontiguousarray(y)
    n, c = y.shape[:2]
    length = y.size // max(1, n * c)
    per = max(1, BLOCK_ELEMS // max(1, length))
    y3 = y.reshape(n, c, length)
    s3 = None if src is None else src.reshape(n, c, length)
    zero = scratch.constant(0, (min(c, per), length), y.dtype)
    if is_quiet():
        _blocks(y3, s3, steps, per, zero)
    else:
        with np.errstate(all="ignore"):
            _blocks(y3, s3, steps, per, zero)
    return {name: y}


def _blocks(y3: np.ndarray, s3: np.ndarray | None, steps: list[Step], per: int, zero: np.ndarray) -> None:
    """Every step on each block of ``per`` channels of y3 (N, C, L); the first reads s3 when given."""
    n, c = y3.shape[:2]
    for i in range(n):
        for c0 in range(0, c, per):
            c1 = min(c, c0 + per)
            blk = y3[i, c0:c1]
            cur = blk if s3 is None else s3[i, c0:c1]
            for s in steps:
                if s.operand is _RELU:   # a 0-d zero past scratch.MAX_CONSTANT (a channel of 4M elements)
                    operand = zero[:c1 - c0] if zero.ndim else zero
                else:
                    operand = s.block(i, c0, c1)
                if s.bound is not None:
                    s.ufunc(cur, operand, s.bound, out=blk)
                elif s.first:
                    s.ufunc(operand, cur, out=blk)
                else:
                    s.ufunc(cur, operand, out=blk)
                cur = blk
