"""What an op's attributes must hold beyond their type, checked at load against the rules its
ONNX schema states in words: a zero stride, a negative pad or kernel size, a Split into zero
parts, a Transpose perm that is no permutation. Such a node used to reach a kernel and come
back as an arithmetic error that said nothing of the cause; now it is one line naming the
node, the attribute and the rule (``fields_problem`` prefixes the node).
"""

from __future__ import annotations

from typing import Callable, Sequence

import onnx

Rule = tuple[str, Callable[[list[int]], bool], str]    # attribute, holds, what it must be

_POSITIVE = "must be positive"
_WINDOWED = ("Conv", "ConvTranspose", "ConvInteger", "QLinearConv", "MaxPool", "AveragePool", "LpPool",
             "MaxUnpool", "DeformConv", "Col2Im")
_AUTO_PADS = {"NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"}


def _all(test: Callable[[int], bool]) -> Callable[[list[int]], bool]:
    return lambda v: all(test(x) for x in v)


_WINDOW_RULES: list[Rule] = [
    ("strides", _all(lambda x: x >= 1), _POSITIVE),
    ("dilations", _all(lambda x: x >= 1), _POSITIVE),
    ("kernel_shape", _all(lambda x: x >= 1), _POSITIVE),
    ("pads", _all(lambda x: x >= 0), "must not be negative"),
    ("pads", lambda v: len(v) % 2 == 0, "must hold a begin and an end per spatial axis (an even count)"),
    ("group", _all(lambda x: x >= 1), _POSITIVE),
]
RULES: dict[str, list[Rule]] = {
    **{op: _WINDOW_RULES for op in _WINDOWED},
    "Split": [("num_outputs", _all(lambda x: x >= 1), _POSITIVE), ("split", _all(lambda x: x >= 0),
                                                                    "must not be negative")],
    "DepthToSpace": [("blocksize", _all(lambda x: x >= 1), _POSITIVE)],
    "SpaceToDepth": [("blocksize", _all(lambda x: x >= 1), _POSITIVE)],
    "LRN": [("size", _all(lambda x: x >= 1), _POSITIVE)],
    "RNN": [("hidden_size", _all(lambda x: x >= 1), _POSITIVE)],
    "GRU": [("hidden_size", _all(lambda x: x >= 1), _POSITIVE)],
    "LSTM": [("hidden_size", _all(lambda x: x >= 1), _POSITIVE)],
    "Transpose": [("perm", lambda v: sorted(v) == list(range(len(v))),
                   "must be a permutation of 0 .. rank-1")],
    "LpNormalization": [("p", _all(lambda x: x in (1, 2)), "must be 1 or 2")],
}


def attr_value_problem(op: str, domain: str, attributes: Sequence[onnx.AttributeProto],
                       outputs: Sequence[str]) -> str | None:
    """The first rule an attribute of a default-domain node breaks, as 'attribute ... must ...'; or None."""
    if domain not in ("", "ai.onnx"):
        return None
    given = {a.name: a for a in attributes if not a.ref_attr_name}
    for name, holds, what in RULES.get(op, ()):
        a = given.get(name)
        if a is None or a.type not in (onnx.AttributeProto.INT, onnx.AttributeProto.INTS):
            continue
        value = [a.i] if a.type == onnx.AttributeProto.INT else list(a.ints)
        if not holds(value):
            return f"attribute {name!r} {what}, got {value[0] if a.type == onnx.AttributeProto.INT else value}"
    return _shape_problem(op, given, outputs)


def _shape_problem(op: str, given: dict[str, onnx.AttributeProto], outputs: Sequence[str]) -> str | None:
    """Rules between attributes: one entry per spatial axis, a Split's count of outputs, auto_pad's words."""
    kernel = given.get("kernel_shape")
    if op in _WINDOWED and kernel is not None and kernel.ints:
        axes = len(kernel.ints)
        for name, want in (("strides", axes), ("dilations", axes), ("pads", 2 * axes)):
            a = given.get(name)
            if a is not None and a.ints and len(a.ints) != want:
                return (f"attribute {name!r} has {len(a.ints)} values; a {axes}-d kernel_shape takes {want}, "
                        f"got {list(a.ints)}")
    pad = given.get("auto_pad")
    word = pad.s.decode(errors="replace") if pad is not None else "NOTSET"
    if op in _WINDOWED and word not in _AUTO_PADS:
        return f"attribute 'auto_pad' must be one of {', '.join(sorted(_AUTO_PADS))}, got {word!r}"
    parts = given.get("num_outputs")
    if op == "Split" and parts is not None and parts.i != len(outputs):
        return f"attribute 'num_outputs' must equal its {len(outputs)} outputs, got {parts.i}"
    return None
