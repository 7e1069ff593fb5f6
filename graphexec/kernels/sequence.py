"""The sequence ops as own kernels: a sequence is a Python list of arrays on the host, as
onnxruntime hands it over and takes it in.

SequenceEmpty, SequenceConstruct, SequenceInsert, SequenceAt, SequenceErase, SequenceLength,
SplitToSequence and ConcatFromSequence, following onnx.reference's conventions (a position
may be negative; SplitToSequence's scalar split leaves a shorter last part). A list is never
changed in place: a Loop's carried sequence or a fed one keeps its value. The tensors a list
holds are made its own when it is written (``engine/host_values.py``). AI CPU tasks, costed
as the fallback costs them (elements of the first output, bytes moved), so a plan is the one
it was with the fallback.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from graphexec.kernels.cost import Cost, _numel
from graphexec.kernels.registry import OpContext, Unsupported, register


def _cost(ins: list, outs: list, moved: float, attrs: dict) -> Cost:
    out = tuple(outs[0]) if outs and outs[0] is not None else ()
    return Cost(float(_numel(out)), moved, "aicpu", 1)


def _seq(op: str, s: Any) -> list:
    if not isinstance(s, list):
        raise Unsupported(f"{op}: input is a {type(s).__name__}, not a sequence")
    return s


def _position(op: str, pos: Any, n: int, inserting: bool = False) -> int:
    """A position in a sequence of n (negative from the end); one past the end only to insert."""
    p = int(np.asarray(pos).reshape(-1)[0])
    top = n if inserting else n - 1
    if not -n <= p <= top:
        raise Unsupported(f"{op}: position {p} is outside a sequence of {n}")
    return p + n if p < 0 else p


@register("SequenceEmpty", since=11, cost=_cost)
def sequence_empty(ctx: OpContext) -> list:
    return []


@register("SequenceConstruct", since=11, cost=_cost)
def sequence_construct(ctx: OpContext, *tensors: np.ndarray) -> list:
    return list(tensors)


@register("SequenceInsert", since=11, cost=_cost)
def sequence_insert(ctx: OpContext, s: Any, tensor: np.ndarray, position: Any = None) -> list:
    out = list(_seq("SequenceInsert", s))
    if position is None:
        out.append(tensor)
    else:
        out.insert(_position("SequenceInsert", position, len(out), inserting=True), tensor)
    return out


@register("SequenceAt", since=11, cost=_cost)
def sequence_at(ctx: OpContext, s: Any, position: Any) -> np.ndarray:
    seq = _seq("SequenceAt", s)
    return seq[_position("SequenceAt", position, len(seq))]


@register("SequenceErase", since=11, cost=_cost)
def sequence_erase(ctx: OpContext, s: Any, position: Any = None) -> list:
    out = list(_seq("SequenceErase", s))
    if not out:
        raise Unsupported("SequenceErase: the sequence is empty")
    del out[-1 if position is None else _position("SequenceErase", position, len(out))]
    return out


@register("SequenceLength", since=11, cost=_cost)
def sequence_length(ctx: OpContext, s: Any) -> np.ndarray:
    return np.array(len(_seq("SequenceLength", s)), np.int64)


@register("SplitToSequence", since=11, cost=_cost)
def split_to_sequence(ctx: OpContext, x: np.ndarray, split: np.ndarray | None = None) -> list:
    axis = int(ctx.attr("axis", 0)) % max(x.ndim, 1)
    dim = x.shape[axis]
    if split is None:
        sizes = [1] * dim
    elif np.ndim(split) == 0:
        step = int(split)
        if step < 1:
            raise Unsupported(f"SplitToSequence: split {step}")
        sizes = [step] * (dim // step) + ([dim % step] if dim % step else [])
    else:
        sizes = [int(v) for v in split]
        if any(v < 0 for v in sizes) or sum(sizes) != dim:
            raise Unsupported(f"SplitToSequence: sizes {sizes} do not split {dim}")
    parts = np.split(x, np.cumsum(sizes)[:-1], axis=axis) if sizes else []
    if split is None and not ctx.attr("keepdims", 1):
        parts = [np.squeeze(p, axis=axis) for p in parts]
    return parts


@register("ConcatFromSequence", since=11, cost=_cost)
def concat_from_sequence(ctx: OpContext, s: Any) -> np.ndarray:
    seq = _seq("ConcatFromSequence", s)
    if not seq:
        raise Unsupported("ConcatFromSequence: the sequence is empty")
    axis = int(ctx.attr("axis"))
    if ctx.attr("new_axis", 0):
        return np.stack(seq, axis=axis)
    return np.concatenate(seq, axis=axis)
