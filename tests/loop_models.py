"""A Loop that runs away, for the tests of the iteration limit and of HBM growth."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def runaway_loop(trips: int, grow: bool = False) -> onnx.ModelProto:
    """v <- v + 1 (or v <- concat(v, v)) for ``trips`` iterations while the condition,
    which never turns false, holds."""
    mk = helper.make_node
    step = mk("Concat", ["v_in", "v_in"], ["v_out"], axis=0) if grow else mk("Add", ["v_in", "one"], ["v_out"])
    body = helper.make_graph(
        [mk("Identity", ["c_in"], ["c_out"]), step], "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("c_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_in", TensorProto.FLOAT, None)],
        [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_out", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.array([1.0], np.float32), "one")])
    g = helper.make_graph(
        [mk("Loop", ["M", "cond", "v0"], ["v"], body=body, name="loop")], "runaway",
        [helper.make_tensor_value_info("v0", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("v", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.array(trips, np.int64), "M"), numpy_helper.from_array(np.array(True), "cond")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
