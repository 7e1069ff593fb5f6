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


def wide_reductions(n: int = 8, rows: int = 256, cols: int = 4096) -> gx.Graph:
    """Independent ReduceSums to one number each: one block apiece, long on one vector core,
    and on one stream the other 31 cores idle (dependency)."""
    ins = [helper.make_tensor_value_info(f"x{i}", TensorProto.FLOAT, [rows, cols]) for i in range(n)]
    nodes = [helper.make_node("ReduceSum", [f"x{i}"], [f"y{i}"], name=f"sum{i}", keepdims=0) for i in range(n)]
    outs = [helper.make_tensor_value_info(f"y{i}", TensorProto.FLOAT, []) for i in range(n)]
    return _model(nodes, ins, outs, name="wide_reductions")


def big_matmuls(n: int = 2, size: int = 2048) -> gx.Graph:
    """A chain of large square MatMuls: every core busy on arithmetic (compute)."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((size, size)).astype(np.float32) / size, f"w{i}")
             for i in range(n)]
    nodes = [helper.make_node("MatMul", [f"t{i}", f"w{i}"], [f"t{i + 1}"], name=f"mm{i}") for i in range(n)]
    nodes[0].input[0], nodes[-1].output[0] = "x", "y"
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [size, size])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [size, size])], inits, name="big_matmuls")


def host_paced_chain(n: int = 20, rows: int = 256, cols: int = 1024) -> gx.Graph:
    """A chain of elementwise ops a little longer than a host launch each. Launched from the
    host through a queue one task deep, each launch waits for the task before to finish, so
    the device idles a launch's time between kernels (host)."""
    ops = ["Relu", "Neg", "Abs"]
    nodes = [helper.make_node(ops[i % 3], [f"t{i}"], [f"t{i + 1}"], name=f"op{i}") for i in range(n)]
    nodes[0].input[0], nodes[-1].output[0] = "x", "y"
    info = lambda name: helper.make_tensor_value_info(name, TensorProto.FLOAT, [rows, cols])  # noqa: E731
    return _model(nodes, [info("x")], [info("y")], name="host_paced_chain")


def shallow_queues(depth: int = 1, base: str = "ascend910") -> "gx.DeviceProfile":
    """The built-in profile with command queues ``depth`` tasks deep (the host-bound setting)."""
    from graphexec.runtime.profiles import load_profile

    return load_profile(base).model_copy(update={"queue_depth": depth, "name": f"{base}-q{depth}"})


def slow_launches(cost_us: float = 6.0, base: str = "ascend910") -> "gx.DeviceProfile":
    """The built-in profile with a host launch ``cost_us`` long: twice a tiny op's device time
    (task overhead, a block's fixed cost and one tile's fill: 2.6 us on the Ascend built-ins)."""
    from graphexec.runtime.profiles import load_profile

    return load_profile(base).model_copy(update={"launch_cost_us": cost_us, "name": f"{base}-launch{cost_us:g}"})


def matmul_chains(chains: int = 16, depth: int = 4, m: int = 16, k: int = 64) -> gx.Graph:
    """The issue's example: independent chains of small MatMuls (each far below the cores
    and below its per-task overhead), all reading the same input."""
    rng = np.random.default_rng(0)
    nodes, inits, outs = [], [], []
    for c in range(chains):
        prev = "x"
        for d in range(depth):
            inits.append(numpy_helper.from_array(rng.standard_normal((k, k)).astype(np.float32) / k, f"w{c}_{d}"))
            nodes.append(helper.make_node("MatMul", [prev, f"w{c}_{d}"], [f"c{c}_{d}"], name=f"mm{c}_{d}"))
            prev = f"c{c}_{d}"
        outs.append(helper.make_tensor_value_info(prev, TensorProto.FLOAT, [m, k]))
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [m, k])], outs, inits,
                  name="matmul_chains")
