"""Make the example ONNX models of this folder (deterministic: fixed seeds).

Run `python models/make_models.py`; the .onnx files are committed beside it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = Path(__file__).parent


def _conv(name: str, x: str, cin: int, cout: int, k: int, rng: np.random.Generator, inits: list) -> list:
    """Conv + Relu with He-initialized weights; returns the nodes, output is name + '_relu'."""
    w = (rng.standard_normal((cout, cin, k, k)) * np.sqrt(2.0 / (cin * k * k))).astype(np.float32)
    b = (rng.standard_normal(cout) * 0.01).astype(np.float32)
    inits += [numpy_helper.from_array(w, f"{name}_w"), numpy_helper.from_array(b, f"{name}_b")]
    return [helper.make_node("Conv", [x, f"{name}_w", f"{name}_b"], [f"{name}_out"], name=name,
                             pads=[k // 2] * 4, kernel_shape=[k, k]),
            helper.make_node("Relu", [f"{name}_out"], [f"{name}_relu"], name=f"{name}_relu")]


def inception_block() -> onnx.ModelProto:
    """One GoogLeNet Inception (3a) block: four parallel branches joined by Concat."""
    rng = np.random.default_rng(0)
    inits: list = []
    nodes = []
    nodes += _conv("b1_1x1", "data", 192, 64, 1, rng, inits)
    nodes += _conv("b2_reduce", "data", 192, 96, 1, rng, inits)
    nodes += _conv("b2_3x3", "b2_reduce_relu", 96, 128, 3, rng, inits)
    nodes += _conv("b3_reduce", "data", 192, 16, 1, rng, inits)
    nodes += _conv("b3_5x5", "b3_reduce_relu", 16, 32, 5, rng, inits)
    nodes.append(helper.make_node("MaxPool", ["data"], ["b4_pool"], name="b4_pool", kernel_shape=[3, 3],
                                  strides=[1, 1], pads=[1, 1, 1, 1]))
    nodes += _conv("b4_proj", "b4_pool", 192, 32, 1, rng, inits)
    nodes.append(helper.make_node("Concat", ["b1_1x1_relu", "b2_3x3_relu", "b3_5x5_relu", "b4_proj_relu"],
                                  ["out"], name="concat", axis=1))
    graph = helper.make_graph(
        nodes, "inception_block",
        [helper.make_tensor_value_info("data", TensorProto.FLOAT, ["N", 192, 28, 28])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["N", 256, 28, 28])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="graphexec")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def main() -> None:
    model = inception_block()
    # a fixed batch of 1 for the README's command; the symbolic "N" stays for --shape
    onnx.save(model, HERE / "inception_block.onnx")
    print("wrote", HERE / "inception_block.onnx")


if __name__ == "__main__":
    main()
