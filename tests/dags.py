"""Random DAG models for property tests: elementwise ops and matmuls on small tensors."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

UNARY = ["Relu", "Sigmoid", "Tanh", "Neg", "Abs"]
BINARY = ["Add", "Mul", "Sub", "Max", "MatMul"]


def random_dag(rng: np.random.Generator, n: int, size: int = 8):
    """An ONNX model of ``n`` ops; each op reads one or two earlier values; sinks are outputs."""
    values = ["x"]
    used: set[str] = set()
    nodes, inits = [], []
    w = numpy_helper.from_array((rng.standard_normal((size, size)) / size).astype(np.float32), "w")
    inits.append(w)
    for i in range(n):
        k = int(rng.integers(0, 3))
        a = values[int(rng.integers(max(0, len(values) - 6), len(values)))] if rng.random() < 0.7 else values[
            int(rng.integers(0, len(values)))]
        out = f"v{i}"
        if k == 0:
            nodes.append(helper.make_node(UNARY[int(rng.integers(len(UNARY)))], [a], [out], name=f"n{i}"))
            used.add(a)
        else:
            b = values[int(rng.integers(0, len(values)))]
            op = BINARY[int(rng.integers(len(BINARY)))]
            if op == "MatMul" and rng.random() < 0.5:
                b = "w"
            nodes.append(helper.make_node(op, [a, b], [out], name=f"n{i}"))
            used |= {a, b}
        values.append(out)
    outputs = [v for v in values[1:] if v not in used] or [values[-1]]
    graph = helper.make_graph(nodes, "dag", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [size, size])],
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, [size, size]) for o in outputs],
                              inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
