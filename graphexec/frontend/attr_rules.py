"""A node's attributes checked against its op's schema at load, for every op ``onnx.defs`` knows:
no attribute the schema lacks, none given twice, each of its declared type, every required one
present, and each value plausible by the facts below. Such a node used to reach a kernel and come
back as an arithmetic error that said nothing of the cause (a zero stride, a negative pad, a
Split into zero parts); now it is one line naming the node, the op, the attribute and the rule
(``fields_problem`` prefixes the node).

The facts are keyed by attribute name and apply to every op whose schema declares that
attribute: the schema says which ops take ``strides``, the table what a stride must be. The few
rules that belong to one op (a Transpose perm, LpNormalization's p) are that op's entries.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import onnx

A = onnx.AttributeProto
Check = Callable[[Any], bool]       # the attribute's value (an int list, a float list or a str) -> holds
Fact = tuple[Check, str]            # holds, what it must be


@dataclass(frozen=True)
class Facts:
    """What the checks need of an op's schema, read once: pybind11 properties cost
    microseconds each, and a model asks the same few ops thousands of times."""

    since: int
    inputs: tuple[int, int]
    outputs: tuple[int, int]
    required: tuple[tuple[int, str], ...]    # (index, formal name) of the inputs that must be given
    attrs: dict[str, int]                    # attribute name -> its AttributeProto type
    required_attrs: tuple[str, ...]
    unchecked: bool                          # the schema lets any other attribute through


# onnx's own exception (defs/nn/defs.cc): LayerNormalization-17 is AllowUncheckedAttributes()
_UNCHECKED = {("", "LayerNormalization")}


@functools.cache
def schema_facts(op: str, domain: str, version: int) -> Facts | None:
    try:
        schema = onnx.defs.get_schema(op, version, domain)
    except (onnx.defs.SchemaError, TypeError):  # TypeError: a version past int32
        return None
    single = onnx.defs.OpSchema.FormalParameterOption.Single
    attrs = schema.attributes
    # AttrType is a pybind11 enum: it has .value at run time, which onnx's stub leaves out
    return Facts(schema.since_version, (schema.min_input, schema.max_input), (schema.min_output, schema.max_output),
                 tuple((i, f.name) for i, f in enumerate(schema.inputs) if f.option == single),
                 {k: a.type.value for k, a in attrs.items()},   # type: ignore[attr-defined]
                 tuple(k for k, a in attrs.items() if a.required), (domain, op) in _UNCHECKED)


def _all(test: Callable[[Any], bool]) -> Check:
    return lambda v: all(test(x) for x in v)


_POSITIVE: Fact = (_all(lambda x: x >= 1), "must be positive")
_NOT_NEGATIVE: Fact = (_all(lambda x: x >= 0), "must not be negative")
_FLAG: Fact = (_all(lambda x: x in (0, 1)), "must be 0 or 1")
_DISTINCT: Fact = (lambda v: len(set(v)) == len(v), "must not repeat an axis")
_TYPES = frozenset(onnx.TensorProto.DataType.values()) - {onnx.TensorProto.UNDEFINED}
_ELEMENT_TYPE: Fact = (_all(lambda x: x in _TYPES), "must name an ONNX element type (TensorProto.DataType)")
_EPSILON: Fact = (_all(lambda x: math.isfinite(x) and x >= 0), "must be finite and not negative")

# attribute name -> facts, for every op whose schema declares it
FACTS: dict[str, tuple[Fact, ...]] = {
    **{k: (_POSITIVE,) for k in ("strides", "dilations", "kernel_shape", "group", "blocksize", "hidden_size",
                                 "size", "num_outputs", "num_groups", "sample_size", "pooled_shape",
                                 "output_height", "output_width")},
    **{k: (_NOT_NEGATIVE,) for k in ("output_padding", "batch_dims", "sampling_ratio", "block_size", "k")},
    **{k: (_FLAG,) for k in ("keepdims", "ceil_mode", "count_include_pad", "transA", "transB", "upper", "largest",
                             "sorted", "select_last_index", "noop_with_empty_axes", "allowzero", "exclusive",
                             "reverse", "new_axis", "fmod", "detect_negative", "detect_positive", "onesided",
                             "inverse", "periodic", "align_corners", "training_mode", "linear_before_reset",
                             "input_forget", "center_point_box", "interleaved", "is_causal", "exclude_outside")},
    **{k: (_ELEMENT_TYPE,) for k in ("to", "dtype", "output_datatype")},
    "output_dtype": ((_all(lambda x: x == 0 or x in _TYPES), "must be 0 or name an ONNX element type"),),
    "axes": (_DISTINCT,),
    "pads": (_NOT_NEGATIVE,),   # a windowed op's (Pad's may be negative: it crops)
    "epsilon": (_EPSILON,),
}
# facts of one op: (op, attribute) -> facts, checked after the attribute's own
OP_FACTS: dict[tuple[str, str], tuple[Fact, ...]] = {
    ("Transpose", "perm"): ((lambda v: sorted(v) == list(range(len(v))), "must be a permutation of 0 .. rank-1"),),
    ("LpNormalization", "p"): ((_all(lambda x: x in (1, 2)), "must be 1 or 2"),),
    ("LpPool", "p"): (_POSITIVE,),
    ("GlobalLpPool", "p"): (_POSITIVE,),
    ("Split", "split"): (_NOT_NEGATIVE,),
}
# the words a string attribute may hold: ("*" for any op declaring it, or the op; attribute);
# each op's list over all its versions (Resize-10 has no cubic; its inference refuses it)
WORDS: dict[tuple[str, str], frozenset[str]] = {
    ("*", "auto_pad"): frozenset({"NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"}),
    **{(op, "direction"): frozenset({"forward", "reverse", "bidirectional"}) for op in ("RNN", "LSTM")},
    ("GRU", "direction"): frozenset({"forward", "reverse", "bidirectional", "foward"}),   # GRU-1's own default
    ("BitShift", "direction"): frozenset({"LEFT", "RIGHT"}),
    ("*", "nearest_mode"): frozenset({"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"}),
    ("*", "keep_aspect_ratio_policy"): frozenset({"stretch", "not_larger", "not_smaller"}),
    **{(op, "reduction"): frozenset({"none", "add", "mul", "max", "min"}) for op in ("ScatterElements", "ScatterND")},
    **{(op, "reduction"): frozenset({"none", "sum", "mean"})
       for op in ("NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss")},
    ("Resize", "coordinate_transformation_mode"): frozenset({
        "half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric",
        "tf_half_pixel_for_nn", "tf_crop_and_resize"}),
    ("Resize", "mode"): frozenset({"nearest", "linear", "cubic"}),
    ("Upsample", "mode"): frozenset({"nearest", "linear", "bilinear"}),
    ("Pad", "mode"): frozenset({"constant", "reflect", "edge", "wrap"}),
    ("DepthToSpace", "mode"): frozenset({"DCR", "CRD"}),
    ("RoiAlign", "mode"): frozenset({"avg", "max"}),
    ("Gelu", "approximate"): frozenset({"none", "tanh"}),
}
SPATIAL = ("kernel_shape", "strides", "dilations", "pads")    # one entry per spatial axis (pads: two)


def attr_problem(op: str, facts: Facts, attributes: Sequence[onnx.AttributeProto],
                 outputs: Sequence[str]) -> str | None:
    """What the schema forbids in the node's attributes, as '... attribute ...'; or None."""
    given: dict[str, onnx.AttributeProto] = {}
    for a in attributes:
        name = a.name
        if name in given:
            return f"gives attribute {name!r} twice"
        given[name] = a
        want = facts.attrs.get(name)
        if want is None:
            if facts.unchecked or name.startswith("__"):   # onnx's internal symbols pass unchecked
                continue
            takes = ", ".join(sorted(facts.attrs)) or "none"
            return f"has attribute {name!r}, which {op}-{facts.since} does not take (it takes: {takes})"
        if a.type and a.type != want and not a.ref_attr_name:
            return f"attribute {name!r} is {_type_name(a.type)}, the op takes {_type_name(want)}"
    for name in facts.required_attrs:
        if name not in given:
            return f"leaves out attribute {name!r}, which {op}-{facts.since} requires"
    return _value_problem(op, facts, given, outputs)


def _value(a: onnx.AttributeProto) -> Any:
    """The value the facts judge: ints and floats as lists, a string as text."""
    t = a.type
    return [a.i] if t == A.INT else list(a.ints) if t == A.INTS else [a.f] if t == A.FLOAT \
        else list(a.floats) if t == A.FLOATS else a.s.decode(errors="replace") if t == A.STRING else None


def _value_problem(op: str, facts: Facts, given: dict[str, onnx.AttributeProto],
                   outputs: Sequence[str]) -> str | None:
    for name, a in given.items():
        if a.ref_attr_name or name not in facts.attrs:
            continue
        words = WORDS.get((op, name)) or WORDS.get(("*", name))
        if words is not None and a.type == A.STRING:
            word = _value(a)
            if word not in words:
                return f"attribute {name!r} must be one of {', '.join(sorted(words))}, got {word!r}"
            continue
        general = FACTS.get(name, ()) if name != "pads" or "strides" in facts.attrs else ()
        for holds, what in (*general, *OP_FACTS.get((op, name), ())):
            value = _value(a)
            if value is not None and not isinstance(value, str) and not holds(value):
                shown = value[0] if a.type in (A.INT, A.FLOAT) else value
                return f"attribute {name!r} {what}, got {shown}"
    return _spatial_problem(given) if "strides" in facts.attrs else _count_problem(op, given, outputs)


def _spatial_problem(given: dict[str, onnx.AttributeProto]) -> str | None:
    """kernel_shape, strides, dilations and pads describe the same spatial axes: their counts agree."""
    lists = [(k, list(given[k].ints)) for k in SPATIAL if k in given and given[k].type == A.INTS and given[k].ints]
    pads = dict(lists).get("pads")
    if pads is not None and len(pads) % 2:
        return f"attribute 'pads' must hold a begin and an end per spatial axis (an even count), got {pads}"
    if not lists:
        return None
    first, values = lists[0]
    axes = len(values) // 2 if first == "pads" else len(values)
    for name, v in lists[1:]:
        want = 2 * axes if name == "pads" else axes
        if len(v) != want:
            return f"attribute {name!r} has {len(v)} values; a {axes}-d {first} takes {want}, got {v}"
    return None


def _count_problem(op: str, given: dict[str, onnx.AttributeProto], outputs: Sequence[str]) -> str | None:
    parts = given.get("num_outputs")
    if op == "Split" and parts is not None and not parts.ref_attr_name and parts.i != len(outputs):
        return f"attribute 'num_outputs' must equal its {len(outputs)} outputs, got {parts.i}"
    return None


def _type_name(t: int) -> str:
    try:
        return A.AttributeType.Name(t)
    except ValueError:
        return f"type {t}"
