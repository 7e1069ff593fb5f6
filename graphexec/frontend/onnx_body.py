"""A control-flow body (If branch, Loop or Scan body) as a graph of its own.

The body's formal inputs stay its first inputs; the names it reads from enclosing scopes
follow as more inputs, typed as the enclosing graph knows them. An outer constant small
enough to matter for shape inference (a shape, an axis) is copied in as a constant of the
body; a larger one stays an input, bound at run time to the enclosing plan's bytes.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from graphexec.frontend.onnx import free_names, from_onnx
from graphexec.ir import Graph
from graphexec.ir.onnx_proto import value_info

SMALL_CONST = 64   # elements: an outer constant up to this size (a shape, axes) is copied into the body


def body_graph(body: onnx.GraphProto, outer: Graph, source: str) -> tuple[Graph, list[str]]:
    """The body as a Graph, and the outer-scope names it takes as inputs (after its own)."""
    g = onnx.GraphProto()
    g.CopyFrom(body)
    outside: list[str] = []
    for name in sorted(free_names(body)):
        v = outer.values.get(name)
        const = None if v is None else v.const
        if const is not None and isinstance(const, np.ndarray) and const.dtype != object and const.size <= SMALL_CONST:
            g.initializer.append(numpy_helper.from_array(const, name))
            continue
        g.input.append(value_info(name, None if v is None else v.type))
        outside.append(name)
    opsets = [helper.make_opsetid(d, v) for d, v in outer.opsets.items()]
    model = helper.make_model(g, opset_imports=opsets, functions=outer.functions)
    model.ir_version = min(model.ir_version, onnx.IR_VERSION)
    return from_onnx(model, source), outside
