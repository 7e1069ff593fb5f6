"""Small ONNX graphs with a known bottleneck, for the profiling and diagnosis tests."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import graphexec as gx


def _model(nodes: list, inputs: list, outputs: list, inits: list | None = None, name: str = "g",
           proto: bool = False) -> gx.Graph | onnx.ModelProto:
    graph = helper.make_graph(nodes, name, inputs, outputs, initializer=inits or [])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return model if proto else gx.load(model)


def elementwise_chain(n: int = 6, rows: int = 4096, cols: int = 1024) -> gx.Graph:
    """Large elementwise ops one after another: every byte goes through HBM each time (memory)."""
    ops = ["Relu", "Neg", "Abs", "Sigmoid", "Neg", "Abs"]
    nodes = [helper.make_node(ops[i % len(ops)], [f"t{i}"], [f"t{i + 1}"], name=f"ew{i}") for i in range(n)]
    nodes[0].input[0], nodes[-1].output[0] = "x", "y"
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [rows, cols])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [rows, cols])], name="elementwise_chain")


def tiny_chain(n: int = 60, size: int = 16, proto: bool = False) -> gx.Graph | onnx.ModelProto:
    """Many tiny ops in a chain: each takes less than its launch cost (launch)."""
    ops = ["Relu", "Neg", "Abs"]
    nodes = [helper.make_node(ops[i % len(ops)], [f"t{i}"], [f"t{i + 1}"], name=f"op{i}") for i in range(n)]
    nodes[0].input[0], nodes[-1].output[0] = "x", "y"
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [size])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [size])], name="tiny_chain", proto=proto)


def wide_matmuls(n: int = 8, m: int = 16, k: int = 8192, width: int = 16) -> gx.Graph:
    """Independent MatMuls, each too small to fill the cores (dependency on one stream)."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((k, width)).astype(np.float32), f"w{i}") for i in range(n)]
    nodes = [helper.make_node("MatMul", ["x", f"w{i}"], [f"y{i}"], name=f"mm{i}") for i in range(n)]
    outs = [helper.make_tensor_value_info(f"y{i}", TensorProto.FLOAT, [m, width]) for i in range(n)]
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [m, k])], outs, inits,
                  name="wide_matmuls")
