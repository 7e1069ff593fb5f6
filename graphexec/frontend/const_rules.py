"""What a kernel checks at run time on an input's values, checked at load when that input is a
constant (an initializer, a Constant node's output, a YAML tensor with a value): a Range with a
zero step, a Slice step of 0, a negative repeat or dim. Such a node used to load, compile and fail
at its first run; now the load refuses it with one line naming the node, the op and the input,
as an attribute's rule does (attr_rules.py). The kernel keeps its own check for values that are
only known at run time.

The spatial attributes are also checked against the rank of an input whose rank is known at
load (a declared graph input, a constant weight): a 2-d kernel on a rank-5 input.
"""

from __future__ import annotations

from typing import Callable, Mapping

import numpy as np

from graphexec.ir import Node, Value

Check = Callable[[np.ndarray], str | None]   # the input's value -> what is wrong, or None


def _numbers(test: Callable[[np.ndarray], bool], what: str) -> Check:
    def check(v: np.ndarray) -> str | None:
        if v.dtype.kind not in "iuf" or v.size > 4096 or test(v):
            return None
        text = str(v.reshape(-1)[:8].tolist())
        return f"{what}, got {text if v.size <= 8 else text[:-1] + ', ...]'}"
    return check


def _reshape(v: np.ndarray) -> str | None:
    if v.dtype.kind not in "iu" or v.size > 4096:
        return None
    if int((v == -1).sum()) > 1:
        return f"holds -1 more than once (at most one dim is inferred), got {v.reshape(-1).tolist()}"
    return None if (v >= -1).all() else f"holds a dim below -1, got {v.reshape(-1).tolist()}"


# op -> (input index, formal name, check); each check the kernel (or the reference) makes at run time
RULES: dict[str, tuple[tuple[int, str, Check], ...]] = {
    "Range": ((2, "delta", lambda v: "is 0; Range needs a nonzero step"
               if v.dtype.kind in "iuf" and v.size == 1 and v.item() == 0 else None),),
    "Slice": ((4, "steps", _numbers(lambda v: bool((v != 0).all()), "holds a step of 0; steps must be nonzero")),),
    "Tile": ((1, "repeats", _numbers(lambda v: bool((v >= 0).all()), "holds a negative repeat count")),),
    "ConstantOfShape": ((0, "input", _numbers(lambda v: bool((v >= 0).all()), "holds a negative dim")),),
    "Expand": ((1, "shape", _numbers(lambda v: bool((v >= 0).all()), "holds a negative dim")),),
    "Reshape": ((1, "shape", _reshape),),
    "TopK": ((1, "K", _numbers(lambda v: bool((v >= 0).all()), "must not be negative")),),
    "Split": ((1, "split", _numbers(lambda v: bool((v >= 0).all()), "holds a negative part")),),
    "Resize": ((2, "scales", _numbers(lambda v: bool((v > 0).all()), "must be positive")),
               (3, "sizes", _numbers(lambda v: bool((v >= 0).all()), "holds a negative size"))),
    "Squeeze": ((1, "axes", _numbers(lambda v: len(set(v.reshape(-1).tolist())) == v.size, "repeats an axis")),),
    "Unsqueeze": ((1, "axes", _numbers(lambda v: len(set(v.reshape(-1).tolist())) == v.size, "repeats an axis")),),
}
_SPATIAL = ("kernel_shape", "strides", "dilations")


def known_values_problem(node: Node, values: Mapping[str, Value]) -> str | None:
    """What the node's constant inputs or known input ranks break, as 'input ...' or
    'attribute ...'; None for a node of another domain or when nothing is known."""
    if node.domain not in ("", "ai.onnx"):
        return None
    for index, formal, check in RULES.get(node.op, ()):
        name = node.inputs[index] if index < len(node.inputs) else ""
        v = values.get(name) if name else None
        const = None if v is None else v.const
        if isinstance(const, np.ndarray):
            problem = check(const)
            if problem:
                return f"input {formal!r} {problem}"
    return _rank_problem(node, values) if "strides" in node.attrs or "kernel_shape" in node.attrs else None


def _rank_problem(node: Node, values: Mapping[str, Value]) -> str | None:
    """A windowed op's spatial attributes take one entry per axis of X past the first two
    (batch, channels); X's rank is known at load when it is a declared input or a constant.
    Col2Im's X is columns, not an image: its attributes count the image's axes."""
    v = values.get(node.inputs[0]) if node.inputs and node.inputs[0] and node.op != "Col2Im" else None
    shape = None if v is None else v.type.shape
    if shape is None or len(shape) < 2:
        return None
    rank = len(shape)
    for key in _SPATIAL:
        got = node.attrs.get(key)
        if isinstance(got, (list, tuple)) and got and len(got) != rank - 2:
            return (f"attribute {key!r} has {len(got)} values; input 'X' of rank {rank} takes {rank - 2}, "
                    f"got {list(got)}")
    return None
