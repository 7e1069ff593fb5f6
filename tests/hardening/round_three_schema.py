"""Issue 39, class 7 continued: every op's attributes checked against its schema at load (an
attribute it does not take, one left out, one of the wrong type or an implausible value, in the
main graph or in a branch), and the run-time checks of a kernel made at load when the input is a
constant (Range's step, Slice's steps, Tile's repeats, Reshape's -1s), each with its exact line
and exit code 2. Counted with round_three_frontend.py's attributes class.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from hardening import bad_inputs as B
from hardening.round_two import Case, Make
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

P = "{d}/m.onnx: node "


def _model(nodes: list[onnx.NodeProto], consts: dict[str, np.ndarray] | None = None, opset: int = 18,
           x: list[int] | None = None) -> Make:
    """x: float32[1, 2, 8, 8] (or ``x``'s shape) through ``nodes``; ``consts`` as initializers."""
    inits = [numpy_helper.from_array(v, k) for k, v in (consts or {}).items()]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, x or [1, 2, 8, 8])],
                     [h.make_tensor_value_info(nodes[-1].output[0], T.FLOAT, None)], inits)
    return lambda d: ["run", B.write(d, "m.onnx", h.make_model(g, opset_imports=[h.make_opsetid("", opset)]))]


def _one(op: str, inputs: list[str] | None = None, consts: dict[str, np.ndarray] | None = None, opset: int = 18,
         **attrs: object) -> Make:
    return _model([h.make_node(op, inputs or ["x"], ["y"], name="n", **attrs)], consts, opset)


def _twice(d: Path) -> list:
    node = h.make_node("LeakyRelu", ["x"], ["y"], name="n")
    node.attribute.extend([h.make_attribute("alpha", 1.0), h.make_attribute("alpha", 2.0)])
    return _model([node])(d)


def _in_branch(d: Path) -> list:
    w = numpy_helper.from_array(np.ones((2, 2, 3, 3), np.float32), "w")
    conv = h.make_node("Conv", ["x", "w"], ["b"], name="inner", strides=[0, 1])
    then = h.make_graph([conv], "then", [], [h.make_tensor_value_info("b", T.FLOAT, None)])
    other = h.make_graph([h.make_node("Neg", ["x"], ["e"])], "else", [], [h.make_tensor_value_info("e", T.FLOAT, None)])
    nodes = [h.make_node("ReduceSum", ["x"], ["s"], keepdims=0), h.make_node("Constant", [], ["z"], value_float=0.0),
             h.make_node("Greater", ["s", "z"], ["c"]), h.make_node("If", ["c"], ["y"], name="branch",
                                                                    then_branch=then, else_branch=other)]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [1, 2, 8, 8])],
                     [h.make_tensor_value_info("y", T.FLOAT, None)], [w])
    return ["run", B.write(d, "m.onnx", h.make_model(g, opset_imports=[h.make_opsetid("", 18)]))]


def _i64(*v: int) -> np.ndarray:
    return np.array(v, np.int64)


def _range_by_constant_node(d: Path) -> list:
    nodes = [h.make_node("Constant", [], ["step"], value=numpy_helper.from_array(np.array(0, np.int64))),
             h.make_node("Constant", [], ["lo"], value=numpy_helper.from_array(np.array(0, np.int64))),
             h.make_node("Constant", [], ["hi"], value=numpy_helper.from_array(np.array(4, np.int64))),
             h.make_node("Range", ["lo", "hi", "step"], ["r"], name="rng"), h.make_node("Cast", ["r"], ["y"], to=1)]
    return _model(nodes)(d)


RANGE_YAML = """version: 1
name: g
opset: 18
inputs: [x]
outputs: [y]
tensors:
  x: {dtype: float32, shape: []}
  limit: {dtype: float32, shape: [], value: 4.0}
  delta: {dtype: float32, shape: [], value: 0.0}
nodes:
  - {name: rng, op: Range, inputs: [x, limit, delta], outputs: [y]}
"""

SCHEMA = [
    Case("attributes", "relu_takes_no_attribute", _one("Relu", foo=1),
         P + "n (Relu) has attribute 'foo', which Relu-14 does not take (it takes: none)"),
    Case("attributes", "conv_unknown_attribute", _one("Conv", ["x", "w"], {"w": np.ones((2, 2, 3, 3), np.float32)},
                                                      stride=[1, 1]),
         P + "n (Conv) has attribute 'stride', which Conv-11 does not take "
             "(it takes: auto_pad, dilations, group, kernel_shape, pads, strides)"),
    Case("attributes", "attribute_given_twice", _twice, P + "n (LeakyRelu) gives attribute 'alpha' twice"),
    Case("attributes", "cast_without_to", _one("Cast"),
         P + "n (Cast) leaves out attribute 'to', which Cast-13 requires"),
    Case("attributes", "cast_to_no_element_type", _one("Cast", to=99),
         P + "n (Cast) attribute 'to' must name an ONNX element type (TensorProto.DataType), got 99"),
    Case("attributes", "conv_strides_an_int", _one("Conv", ["x", "w"], {"w": np.ones((2, 2, 3, 3), np.float32)},
                                                   strides=2),
         P + "n (Conv) attribute 'strides' is INT, the op takes INTS"),
    Case("attributes", "reduce_keepdims_two", _one("ReduceMax", keepdims=2),
         P + "n (ReduceMax) attribute 'keepdims' must be 0 or 1, got 2"),
    Case("attributes", "mvn_repeats_an_axis", _one("MeanVarianceNormalization", axes=[1, 1]),
         P + "n (MeanVarianceNormalization) attribute 'axes' must not repeat an axis, got [1, 1]"),
    Case("attributes", "pad_mode_not_a_mode", _one("Pad", ["x", "p"], {"p": _i64(0, 0, 1, 1, 0, 0, 1, 1)},
                                                   mode="mirror"),
         P + "n (Pad) attribute 'mode' must be one of constant, edge, reflect, wrap, got 'mirror'"),
    Case("attributes", "batchnorm_negative_epsilon",
         _one("BatchNormalization", ["x", "s", "b", "m", "v"], {k: np.ones(2, np.float32) for k in "sbmv"},
              epsilon=-1.0),
         P + "n (BatchNormalization) attribute 'epsilon' must be finite and not negative, got -1.0"),
    Case("attributes", "conv_kernel_for_another_rank",
         _one("Conv", ["x", "w"], {"w": np.ones((2, 2, 3, 3), np.float32)}, kernel_shape=[3, 3, 3]),
         P + "n (Conv) attribute 'kernel_shape' has 3 values; input 'X' of rank 4 takes 2, got [3, 3, 3]"),
    Case("attributes", "conv_in_an_if_branch", _in_branch,
         "{d}/m.onnx: in branch's then_branch: node inner (Conv) attribute 'strides' must be positive, got [0, 1]"),
    Case("attributes", "range_step_from_a_constant_node", _range_by_constant_node,
         P + "rng (Range) input 'delta' is 0; Range needs a nonzero step"),
    Case("attributes", "yaml_range_delta_zero", lambda d: ["validate", B.write(d, "g.yaml", RANGE_YAML)],
         "{d}/g.yaml:11:28: node rng (Range) input 'delta' is 0; Range needs a nonzero step"),
    Case("attributes", "slice_step_zero",
         _one("Slice", ["x", "s", "e", "a", "k"], {"s": _i64(0), "e": _i64(2), "a": _i64(1), "k": _i64(0)}),
         P + "n (Slice) input 'steps' holds a step of 0; steps must be nonzero, got [0]"),
    Case("attributes", "tile_negative_repeats", _one("Tile", ["x", "r"], {"r": _i64(1, -1, 1, 1)}),
         P + "n (Tile) input 'repeats' holds a negative repeat count, got [1, -1, 1, 1]"),
    Case("attributes", "reshape_two_unknown_dims", _one("Reshape", ["x", "r"], {"r": _i64(-1, -1)}),
         P + "n (Reshape) input 'shape' holds -1 more than once (at most one dim is inferred), got [-1, -1]"),
    Case("attributes", "expand_negative_dim", _one("Expand", ["x", "r"], {"r": _i64(1, 2, -8, 8)}),
         P + "n (Expand) input 'shape' holds a negative dim, got [1, 2, -8, 8]"),
]
