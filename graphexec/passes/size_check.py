"""Hostile sizes: refuse tensors the device cannot hold before anything is allocated.

Sizes are Python ints, so dims whose product overflows int64 are reported with their
true number instead of wrapping around to something small or negative.
"""

from __future__ import annotations

import logging
import math
from typing import Any, cast

import numpy as np
import onnx
from onnx import helper, numpy_helper

from graphexec.errors import GraphError, OutOfMemoryError
from graphexec.ir import Graph, Node, TensorType
from graphexec.ir.onnx_proto import node_proto
from graphexec.passes.base import CompileState, Pass, PassResult

log = logging.getLogger(__name__)

INT64_MAX = 2**63 - 1
FOLD_MAX_BYTES = 1 << 28  # a folded constant bigger than this is computed at run time instead
_DATA_MAX = 4096  # constant inputs up to this many elements go to inference as data


def unholdable(t: TensorType) -> bool:
    """True when numpy cannot make an array of static type ``t``, even an empty one: it counts
    the bytes of the non-zero dims, so [2**62, 0] of float32 is refused though it holds nothing."""
    assert t.shape is not None and t.dtype is not None
    dims = cast("tuple[int, ...]", t.shape)  # a static type: every dim is an int
    return math.prod(d for d in dims if d) * t.dtype.itemsize > INT64_MAX


def fits_device(t: TensorType, profile: Any) -> bool:
    """Whether ``check_fits`` lets ``t`` pass (the common case, answered without a message)."""
    return not t.is_static or (0 < t.nbytes <= profile.hbm_capacity_bytes)


def check_fits(what: str, t: TensorType, profile: Any) -> None:
    """Raise OutOfMemoryError naming ``what`` if the static type ``t`` exceeds the device's memory
    (GraphError if it is empty but numpy still cannot hold its dims)."""
    if not t.is_static:
        return
    if t.nbytes == 0 and unholdable(t):
        raise GraphError(f"{what} {t} is empty, but its other dims are too big for numpy to hold")
    if t.nbytes <= profile.hbm_capacity_bytes:
        return
    assert t.shape is not None
    dims = cast("tuple[int, ...]", t.shape)  # static (checked on entry): every dim is an int
    over = ", its element count overflows int64" if math.prod(dims) > INT64_MAX else ""
    raise OutOfMemoryError(f"{what} {t} needs {t.nbytes} bytes{over}; device {profile.name} has "
                           f"{profile.hbm_capacity_bytes} bytes")


class SizeCheck(Pass):
    """Every tensor whose type is known must fit the device on its own."""

    name = "sizes"

    def call(self, state: CompileState) -> PassResult:
        graph = state.graph
        producer = {o: n for n in graph.nodes for o in n.outputs if o}
        for name, v in graph.values.items():
            if fits_device(v.type, state.profile):
                continue
            node = producer.get(name)
            of = f" (output of node {node})" if node is not None else ""
            check_fits(f"{graph.source}: tensor {name!r}{of}", v.type, state.profile)
        return PassResult(state, False)


# ops whose outputs hold no more elements than their largest input (Concat: all its inputs;
# see ``_room`` for empty inputs)
_NO_BIGGER = frozenset({
    "Abs", "Acos", "Acosh", "ArgMax", "ArgMin", "Asin", "Asinh", "Atan", "Atanh", "Cast", "Ceil",
    "Concat", "Cos", "Cosh", "Erf", "Exp", "Flatten", "Floor", "Identity", "IsInf", "IsNaN", "Log",
    "Neg", "Not", "Reciprocal", "ReduceL1", "ReduceL2", "ReduceLogSumExp", "ReduceMax",
    "ReduceMean", "ReduceMin", "ReduceProd", "ReduceSum", "ReduceSumSquare", "Relu", "Reshape",
    "Round", "Shape", "Sigmoid", "Sign", "Sin", "Sinh", "Size", "Slice", "Softmax", "Split", "Sqrt",
    "Squeeze", "Tan", "Tanh", "Transpose", "Unsqueeze",
})
# elementwise ops with numpy broadcasting: their output has the inputs' broadcast shape
_BROADCAST = frozenset({
    "Add", "And", "BitShift", "Div", "Equal", "Greater", "GreaterOrEqual", "Less", "LessOrEqual",
    "Max", "Min", "Mod", "Mul", "Or", "Pow", "Sub", "Sum", "Where", "Xor",
})
_WIDEST = 16   # bytes of the widest element (complex128) an output may have


def _room(a: np.ndarray) -> int:
    """Elements an output made from ``a`` by a ``_NO_BIGGER`` op may hold: a reduction of an
    empty axis keeps the other dims (ReduceSum of [0, n] is [n]), Shape holds a rank's worth."""
    return max(math.prod(d for d in a.shape if d), a.ndim, 1)


def bound_elements(node: Node, arrays: list[np.ndarray]) -> int | None:
    """An upper bound of the elements of each output of ``node`` on these constant inputs,
    known without asking onnx; None for ops that may make more (ConstantOfShape, Expand,
    Tile, MatMul, ...) or inputs that do not fit the op (the fold itself reports them)."""
    if node.domain not in ("", "ai.onnx") or not arrays:
        return None
    if node.op in _NO_BIGGER:
        rooms = [_room(a) for a in arrays]
        return sum(rooms) if node.op == "Concat" else max(rooms)
    if node.op == "Gather" and len(arrays) == 2:   # data's dims with ``axis`` replaced by the indices'
        data, indices = arrays
        axis = node.attrs.get("axis", 0)
        if not -data.ndim <= axis < data.ndim:
            return None
        axis %= data.ndim
        return math.prod(data.shape[:axis] + data.shape[axis + 1:]) * indices.size
    if node.op in _BROADCAST:
        try:
            return math.prod(np.broadcast_shapes(*(a.shape for a in arrays)))
        except ValueError:
            return None
    return None


def fold_too_big(node: Node, graph: Graph) -> bool:
    """True when onnx's inference says folding ``node`` would make more than FOLD_MAX_BYTES.

    Checked before the fold computes anything: ConstantOfShape, Expand or Tile of a
    hostile shape would otherwise try to fill terabytes on the host at compile time.
    Ops that cannot grow past their inputs are answered without onnx (``bound_elements``):
    its per-node inference was a third of a small model's shapes pass.
    """
    consts = [graph.values[n].const for n in node.all_inputs]
    if all(isinstance(c, np.ndarray) and c.dtype != object for c in consts):
        bound = bound_elements(node, cast("list[np.ndarray]", consts))
        if bound is not None and bound * _WIDEST <= FOLD_MAX_BYTES:
            return False
    try:
        schema = onnx.defs.get_schema(node.op, graph.opsets.get(node.domain or "", 1), node.domain or "")
    except (onnx.defs.SchemaError, TypeError):  # TypeError: an opset past int32
        return False
    types, data = {}, {}
    for name in node.all_inputs:
        c = graph.values[name].const
        if not isinstance(c, np.ndarray) or c.dtype == object:
            return False
        types[name] = helper.make_tensor_type_proto(helper.np_dtype_to_tensor_dtype(c.dtype), c.shape)
        if c.size <= _DATA_MAX:
            data[name] = numpy_helper.from_array(c, name)
    if node.implicit_inputs:  # subgraphs: inference needs their scope; leave it to the fold
        return False
    try:
        outs = onnx.shape_inference.infer_node_outputs(schema, node_proto(node), types, data)
    except Exception as e:  # noqa: BLE001  (inference is best effort; the fold itself decides)
        log.debug("no size estimate for %s: %s", node, e)
        return False
    for tp in outs.values():
        tt = tp.tensor_type
        dims = list(tt.shape.dim) if tt.HasField("shape") else []
        if tt.elem_type and all(d.HasField("dim_value") for d in dims):
            size = math.prod(d.dim_value for d in dims) * helper.tensor_dtype_to_np_dtype(tt.elem_type).itemsize
            if size > FOLD_MAX_BYTES:
                log.debug("not folding %s: it would make %d bytes", node, size)
                return True
    return False
