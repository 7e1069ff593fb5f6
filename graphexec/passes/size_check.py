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


def fold_too_big(node: Node, graph: Graph) -> bool:
    """True when onnx's inference says folding ``node`` would make more than FOLD_MAX_BYTES.

    Checked before the fold computes anything: ConstantOfShape, Expand or Tile of a
    hostile shape would otherwise try to fill terabytes on the host at compile time.
    """
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
