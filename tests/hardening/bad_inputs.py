"""Data-free generators of bad (and hostile) inputs: each writes one file into a folder.

Everything is built with ``onnx.helper`` and plain text, so the corpus needs no data
files and every case stays small and readable. The fuzzers reuse the small models.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from graphexec.runtime.profiles import DeviceProfile, builtin_profiles

OPSET = 17
RELU_YAML = """\
name: relu
opset: 17
inputs: [x]
outputs: [y]
tensors:
  x: {dtype: float32, shape: [2, 3]}
nodes:
  - {name: act, op: Relu, inputs: [x], outputs: [y]}
"""


def model(nodes: list[onnx.NodeProto], inputs: tuple[str, ...] = ("x",), outputs: tuple[str, ...] = ("y",),
          shape: list = [2, 3], initializers: list[onnx.TensorProto] = (), opset: int = OPSET,
          name: str = "g") -> onnx.ModelProto:
    """A float32 model whose inputs and outputs all have ``shape``."""
    vi = helper.make_tensor_value_info
    g = helper.make_graph(nodes, name, [vi(n, TensorProto.FLOAT, shape) for n in inputs],
                          [vi(n, TensorProto.FLOAT, shape) for n in outputs], list(initializers))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def relu_model() -> onnx.ModelProto:
    """x -> Relu -> y on float32[2,3]: the smallest valid model."""
    return model([helper.make_node("Relu", ["x"], ["y"], name="act")])


def small_models() -> dict[str, onnx.ModelProto]:
    """A few small valid models with different ops, attributes and initializers (fuzz seeds)."""
    w = numpy_helper.from_array(np.arange(9, dtype=np.float32).reshape(3, 3) / 9, "w")
    b = numpy_helper.from_array(np.full((3,), 0.5, np.float32), "b")
    axes = numpy_helper.from_array(np.array([1], np.int64), "axes")
    cond = helper.make_tensor_value_info
    branch = lambda op, out: helper.make_graph(  # noqa: E731
        [helper.make_node(op, ["x"], [out])], f"{op}_branch", [], [cond(out, TensorProto.FLOAT, [2, 3])])
    shape_ops = [helper.make_node("Shape", ["x"], ["s"], name="shape"),
                 helper.make_node("Concat", ["s", "minus1"], ["s3"], axis=0, name="cat"),
                 helper.make_node("Reshape", ["x", "s3"], ["r"], name="reshape"),
                 helper.make_node("Transpose", ["r"], ["t"], perm=[2, 1, 0], name="tr"),
                 helper.make_node("Expand", ["t", "s3"], ["e"], name="expand"),
                 helper.make_node("ReduceSum", ["e", "last"], ["y"], keepdims=0, name="sum")]
    conv = [helper.make_node("Reshape", ["x", "nchw"], ["img"], name="to_nchw"),
            helper.make_node("Conv", ["img", "k"], ["c"], pads=[1, 1, 1, 1], name="conv"),
            helper.make_node("MaxPool", ["c"], ["p"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], name="pool"),
            helper.make_node("Reshape", ["p", "back"], ["y"], name="back")]
    return {
        "relu": relu_model(),
        "shapes": model(shape_ops, initializers=[numpy_helper.from_array(np.array([1], np.int64), "minus1"),
                                                  numpy_helper.from_array(np.array([2], np.int64), "last")]),
        "conv": model(conv, initializers=[numpy_helper.from_array(np.array([1, 1, 2, 3], np.int64), "nchw"),
                                          numpy_helper.from_array(np.ones((1, 1, 3, 3), np.float32), "k"),
                                          numpy_helper.from_array(np.array([2, 3], np.int64), "back")]),
        "mlp": model([helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
                      helper.make_node("Add", ["h", "b"], ["a"], name="add"),
                      helper.make_node("Tanh", ["a"], ["y"], name="act")], initializers=[w, b]),
        "softmax_sum": model([helper.make_node("Softmax", ["x"], ["s"], axis=1, name="sm"),
                              helper.make_node("ReduceSum", ["s", "axes"], ["r"], keepdims=1, name="sum"),
                              helper.make_node("Mul", ["s", "r"], ["y"], name="mul")], initializers=[axes]),
        "if": model([helper.make_node("ReduceMax", ["x"], ["m"], keepdims=0, name="max"),
                     helper.make_node("Greater", ["m", "zero"], ["c"], name="gt"),
                     helper.make_node("If", ["c"], ["y"], name="branch",
                                      then_branch=branch("Relu", "t"), else_branch=branch("Neg", "e"))],
                    initializers=[numpy_helper.from_array(np.float32(0), "zero")]),
    }


def write(folder: Path, name: str, data: bytes | str | onnx.ModelProto) -> Path:
    """Write ``data`` (bytes, text or a model) to ``folder/name``; returns the path."""
    path = folder / name
    if isinstance(data, onnx.ModelProto):
        data = data.SerializeToString()
    if isinstance(data, str):
        path.write_text(data, encoding="utf-8")
    else:
        path.write_bytes(data)
    return path


def chain(n: int, op: str = "Relu") -> onnx.ModelProto:
    """``n`` nodes of a unary ``op`` one after another on float32[2,3]."""
    names = ["x"] + [f"t{i}" for i in range(1, n)] + ["y"]
    return model([helper.make_node(op, [names[i]], [names[i + 1]], name=f"n{i}") for i in range(n)])


def nested_ifs(depth: int) -> onnx.ModelProto:
    """An If whose then-branch holds an If, ``depth`` levels deep; the innermost is a Relu.

    Built by mutating fields in place: ``helper.make_node`` copies through protobuf's
    parser, which refuses more than about 32 levels.
    """
    vi = lambda n: helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 3])  # noqa: E731
    m = model([], initializers=[numpy_helper.from_array(np.array(True), "c")])
    g, out = m.graph, "y"
    for level in range(depth):
        node = g.node.add(op_type="If", name=f"if{level}", input=["c"], output=[out])
        other = node.attribute.add(name="else_branch", type=onnx.AttributeProto.GRAPH)
        other.g.name = f"else{level}"
        other.g.node.add(op_type="Neg", input=["x"], output=[f"e{level}"])
        other.g.output.append(vi(f"e{level}"))
        then = node.attribute.add(name="then_branch", type=onnx.AttributeProto.GRAPH)
        g, out = then.g, f"r{level}"
        g.name = f"then{level}"
        g.output.append(vi(out))
    g.node.add(op_type="Relu", name="innermost", input=["x"], output=[out])
    return m


def random_bytes(n: int = 256, seed: int = 0) -> bytes:
    """``n`` bytes of seeded noise."""
    return np.random.default_rng(seed).bytes(n)


def truncated(data: bytes, keep: float = 0.5) -> bytes:
    """The first ``keep`` fraction of ``data``."""
    return data[: int(len(data) * keep)]


def bit_flipped(data: bytes, index: int, bit: int) -> bytes:
    """``data`` with one bit flipped."""
    out = bytearray(data)
    out[index] ^= 1 << bit
    return bytes(out)


def flip_in(data: bytes, needle: bytes, offset: int, bit: int) -> bytes:
    """Flip one bit of the first occurrence of ``needle`` (e.g. inside an op name)."""
    return bit_flipped(data, data.index(needle) + offset, bit)


def mismatched_initializer(raw: bool) -> onnx.ModelProto:
    """An initializer declared [2,3] holding 4 floats (as raw bytes or as float_data)."""
    t = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[2, 3])
    if raw:
        t.raw_data = np.zeros(4, np.float32).tobytes()
    else:
        t.float_data.extend([1.0, 2.0, 3.0, 4.0])
    return model([helper.make_node("Add", ["x", "w"], ["y"], name="add")], initializers=[t])


def external_data_model(location: str = "weights.bin") -> onnx.ModelProto:
    """An initializer whose data lives in the file ``location`` (which nobody writes)."""
    t = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[2, 3], data_location=TensorProto.EXTERNAL)
    t.external_data.add(key="location", value=location)
    return model([helper.make_node("Add", ["x", "w"], ["y"], name="add")], initializers=[t])


def hostile_constant(dims: list[int]) -> onnx.ModelProto:
    """ConstantOfShape of the constant ``dims``, added to x: the size is only known once folded."""
    s = numpy_helper.from_array(np.array(dims, np.int64), "s")
    g = helper.make_graph([helper.make_node("ConstantOfShape", ["s"], ["c"], name="fill"),
                           helper.make_node("Add", ["x", "c"], ["y"], name="add")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [s])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)])


def yaml_graph(nodes: str = "  - {name: act, op: Relu, inputs: [x], outputs: [y]}\n",
               replace: dict[str, str] | None = None) -> str:
    """RELU_YAML with its nodes replaced, then each ``old: new`` text replacement applied."""
    text = RELU_YAML.split("nodes:\n")[0] + "nodes:\n" + nodes
    for old, new in (replace or {}).items():
        text = text.replace(old, new)
    return text


def device_profile(folder: Path, **fields: object) -> Path:
    """The built-in ascend910 profile with ``fields`` replaced, written to folder/device.yaml."""
    import yaml

    data = builtin_profiles()["ascend910"].model_dump()
    for key, value in fields.items():
        parent, _, leaf = key.rpartition("__")
        target = data
        for part in filter(None, parent.split("__")):
            target = target[part]
        target[leaf] = value
    return write(folder, "device.yaml", yaml.safe_dump(data))


def with_elem_type(elem_type: int) -> onnx.ModelProto:
    """relu_model whose input declares an element type number onnx may not know."""
    m = relu_model()
    m.graph.input[0].type.tensor_type.elem_type = elem_type
    return m


def with_initializer_type(data_type: int) -> onnx.ModelProto:
    """An Add whose initializer claims the data type number ``data_type``."""
    t = numpy_helper.from_array(np.ones((2, 3), np.float32), "w")
    t.data_type = data_type
    return model([helper.make_node("Add", ["x", "w"], ["y"], name="add")], initializers=[t])


def small_device() -> DeviceProfile:
    """ascend910 with 64 MiB of HBM: fuzzed sizes hit the size check instead of the host's memory."""
    return builtin_profiles()["ascend910"].model_copy(update={"hbm_capacity_bytes": 64 << 20})
