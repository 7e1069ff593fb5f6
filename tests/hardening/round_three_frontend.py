"""Issue 39's frontend classes, each case with its exact line and exit code: 6 (local ONNX
functions priced before they are expanded), 7 (attributes checked against the op's rules at
load; container inputs), 10 (round trips that kept losing type) and 11 (left from round two:
a FIFO as external data, a run-time Expand to 4 TiB, a big-endian .npy). A case with exit
code 0 and no message must run clean; ``check`` then looks at what it wrote. The corpus
report (conftest.py) counts them per class with round_three.py's.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import onnx
from hardening import bad_inputs as B
from hardening.round_three_schema import SCHEMA
from hardening.round_two import Case, Make
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

from graphexec import cli

OPS = [h.make_opsetid("", 18), h.make_opsetid("d", 1)]


def _fn(name: str, body: list[onnx.NodeProto]) -> onnx.FunctionProto:
    return h.make_function("d", name, ["x"], ["y"], body, OPS)


def _call(callee: str, x: str = "x", y: str = "y") -> onnx.NodeProto:
    return h.make_node(callee, [x], [y], domain="d")


def _calling(functions: list[onnx.FunctionProto], top: str = "F0") -> Make:
    g = h.make_graph([_call(top)], "g", [h.make_tensor_value_info("x", T.FLOAT, [2])],
                     [h.make_tensor_value_info("y", T.FLOAT, [2])])
    return lambda d: ["run", B.write(d, "m.onnx", h.make_model(g, opset_imports=OPS, functions=functions))]


def _doubling(levels: int, calls: int = 2) -> list[onnx.FunctionProto]:
    """F0 calls F1 ``calls`` times, ..., F<levels> is one Relu: calls**levels nodes."""
    fns = []
    for i in range(levels):
        names = [f"t{k}" for k in range(calls - 1)]
        ins, outs = ["x", *names], [*names, "y"]
        fns.append(_fn(f"F{i}", [_call(f"F{i + 1}", a, b) for a, b in zip(ins, outs)]))
    return fns + [_fn(f"F{levels}", [h.make_node("Relu", ["x"], ["y"])])]


def _chain(n: int) -> list[onnx.FunctionProto]:
    return [_fn(f"F{i}", [_call(f"F{i + 1}")]) for i in range(n)] + [_fn(f"F{n}", [h.make_node("Relu", ["x"], ["y"])])]


def _branch_calls(callee: str) -> onnx.FunctionProto:
    """A calls ``callee`` inside an If branch."""
    then = h.make_graph([_call(callee, "x", "b")], "then", [], [h.make_tensor_value_info("b", T.FLOAT, [2])])
    other = h.make_graph([h.make_node("Neg", ["x"], ["n"])], "else", [], [h.make_tensor_value_info("n", T.FLOAT, [2])])
    return _fn("A", [h.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
                     h.make_node("Constant", [], ["z"], value_float=0.0), h.make_node("Greater", ["s", "z"], ["c"]),
                     h.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)])


FUNCTIONS = [
    Case("functions", "functions_double_30_times", _calling(_doubling(30)),
         "{d}/m.onnx: inlining its functions would make 1,073,741,824 nodes, more than 250,000 "
         "(function d::F0 alone expands to 1,073,741,824)"),
    Case("functions", "functions_just_over_the_bound", _calling(_doubling(18)),
         "{d}/m.onnx: inlining its functions would make 262,144 nodes, more than 250,000 "
         "(function d::F0 alone expands to 262,144)"),
    Case("functions", "functions_fan_out_1000_by_1000", _calling(_doubling(2, calls=1000)),
         "{d}/m.onnx: inlining its functions would make 1,000,000 nodes, more than 250,000 "
         "(function d::F0 alone expands to 1,000,000)"),
    Case("functions", "functions_chain_of_1000", _calling(_chain(1000)),
         "{d}/m.onnx: model-local functions nest more than 64 calls deep: "
         "d::F0 -> d::F1 -> d::F2 -> ... -> d::F63 -> d::F64"),
    Case("functions", "function_calls_itself", _calling([_fn("F0", [_call("F0")])]),
         "{d}/m.onnx: model-local functions call themselves: d::F0 -> d::F0"),
    Case("functions", "functions_recurse_through_an_if_branch",
         _calling([_branch_calls("B"), _fn("B", [_call("A")])], top="A"),
         "{d}/m.onnx: model-local functions call themselves: d::A -> d::B -> d::A"),
    Case("functions", "function_calls_an_undefined_one", _calling([_fn("F0", [_call("Gone")])]),
         "{d}/m.onnx: function d::F0 calls d::Gone (node F0__0/Gone), which the model does not define"),
]


def _image(nodes: list[onnx.NodeProto], inputs: list[onnx.ValueInfoProto] | None = None) -> Make:
    """A model on x: float32[1, 2, 8, 8] with a 2x2x3x3 weight w."""
    w = numpy_helper.from_array(np.ones((2, 2, 3, 3), np.float32), "w")
    g = h.make_graph(nodes, "g", inputs or [h.make_tensor_value_info("x", T.FLOAT, [1, 2, 8, 8])],
                     [h.make_tensor_value_info(nodes[-1].output[0], T.FLOAT, None)], [w])
    return lambda d: ["run", B.write(d, "m.onnx", h.make_model(g, opset_imports=[h.make_opsetid("", 18)]))]


def _conv(**attrs: object) -> Make:
    return _image([h.make_node("Conv", ["x", "w"], ["y"], name="conv", **attrs)])


def _typed(vi: onnx.ValueInfoProto, node: onnx.NodeProto) -> Make:
    g = h.make_graph([node], "g", [vi], [h.make_tensor_value_info(node.output[0], T.INT64, None)])
    return lambda d: ["run", B.write(d, "m.onnx", h.make_model(g, opset_imports=[h.make_opsetid("", 18)]))]


def _range_delta_zero(d: Path) -> list:
    c = [numpy_helper.from_array(np.array(v, np.float32), n) for n, v in (("limit", 10.0), ("delta", 0.0))]
    g = h.make_graph([h.make_node("Range", ["x", "limit", "delta"], ["y"], name="rng")], "g",
                     [h.make_tensor_value_info("x", T.FLOAT, [])], [h.make_tensor_value_info("y", T.FLOAT, None)], c)
    return ["run", B.write(d, "m.onnx", h.make_model(g, opset_imports=[h.make_opsetid("", 18)]))]


PREFIX = "{d}/m.onnx: node "
ATTRIBUTES = [
    Case("attributes", "conv_stride_zero", _conv(strides=[0, 1]),
         PREFIX + "conv (Conv) attribute 'strides' must be positive, got [0, 1]"),
    Case("attributes", "conv_negative_pads", _conv(pads=[-1, 0, 0, 0]),
         PREFIX + "conv (Conv) attribute 'pads' must not be negative, got [-1, 0, 0, 0]"),
    Case("attributes", "conv_dilation_zero", _conv(dilations=[1, 0]),
         PREFIX + "conv (Conv) attribute 'dilations' must be positive, got [1, 0]"),
    Case("attributes", "conv_odd_pads", _conv(pads=[1, 1, 1]),
         PREFIX + "conv (Conv) attribute 'pads' must hold a begin and an end per spatial axis (an even count), "
                  "got [1, 1, 1]"),
    Case("attributes", "conv_group_zero", _conv(group=0),
         PREFIX + "conv (Conv) attribute 'group' must be positive, got 0"),
    Case("attributes", "conv_strides_for_another_rank", _conv(kernel_shape=[3, 3], strides=[1, 1, 1]),
         PREFIX + "conv (Conv) attribute 'strides' has 3 values; a 2-d kernel_shape takes 2, got [1, 1, 1]"),
    Case("attributes", "maxpool_negative_kernel",
         _image([h.make_node("MaxPool", ["x"], ["y"], name="pool", kernel_shape=[-1, 2])]),
         PREFIX + "pool (MaxPool) attribute 'kernel_shape' must be positive, got [-1, 2]"),
    Case("attributes", "maxpool_unknown_auto_pad",
         _image([h.make_node("MaxPool", ["x"], ["y"], name="pool", kernel_shape=[2, 2], auto_pad="SAME")]),
         PREFIX + "pool (MaxPool) attribute 'auto_pad' must be one of NOTSET, SAME_LOWER, SAME_UPPER, VALID, "
                  "got 'SAME'"),
    Case("attributes", "split_into_zero_outputs",
         _image([h.make_node("Split", ["x"], ["y"], name="split", axis=1, num_outputs=0)]),
         PREFIX + "split (Split) attribute 'num_outputs' must be positive, got 0"),
    Case("attributes", "split_count_not_its_outputs",
         _image([h.make_node("Split", ["x"], ["y"], name="split", axis=1, num_outputs=2)]),
         PREFIX + "split (Split) attribute 'num_outputs' must equal its 1 outputs, got 2"),
    Case("attributes", "transpose_perm_repeats",
         _image([h.make_node("Transpose", ["x"], ["y"], name="t", perm=[0, 0, 1, 2])]),
         PREFIX + "t (Transpose) attribute 'perm' must be a permutation of 0 .. rank-1, got [0, 0, 1, 2]"),
    Case("attributes", "depth_to_space_blocksize_zero",
         _image([h.make_node("DepthToSpace", ["x"], ["y"], name="d2s", blocksize=0)]),
         PREFIX + "d2s (DepthToSpace) attribute 'blocksize' must be positive, got 0"),
    Case("attributes", "range_delta_zero", _range_delta_zero,
         PREFIX + "rng (Range) input 'delta' is 0; Range needs a nonzero step"),
    Case("attributes", "sequence_input_needs_a_value",
         _typed(h.make_tensor_sequence_value_info("s", T.FLOAT, None), h.make_node("SequenceLength", ["s"], ["n"])),
         "input 's' is a sequence of type seq(tensor(float)); graphexec makes no default value for it: "
         "give it with --input s=FILE.npz (the form --save writes)"),
    Case("attributes", "optional_input_needs_a_value",
         _typed(h.make_value_info("o", h.make_optional_type_proto(h.make_tensor_type_proto(T.FLOAT, [2]))),
                h.make_node("OptionalHasElement", ["o"], ["n"])),
         "input 'o' is an optional of type optional(tensor(float)); graphexec makes no default value for it: "
         "give it with --input o=FILE.npz (the form --save writes)"),
]

CONV_YAML = """version: 1
name: g
opset: 18
inputs: [x]
outputs: [y]
tensors:
  x: {dtype: float32, shape: [1, 2, 8, 8]}
  w: {dtype: float32, shape: [2, 2, 3, 3], value: 1.0}
nodes:
  - {name: conv, op: Conv, inputs: [x, w], outputs: [y], attributes: {strides: [0, 1]}}
"""
ATTRIBUTES.append(Case("attributes", "yaml_conv_stride_zero_at_its_attribute",
                       lambda d: ["validate", B.write(d, "g.yaml", CONV_YAML)],
                       "{d}/g.yaml:10:71: node conv (Conv) attribute 'strides' must be positive, got [0, 1]"))

ODD_NAMES = ("1e3", "2e-3", "1E+5", "-4e2", "true", "null", "0x10", ".inf", "~")


def _odd_names(d: Path) -> Path:
    """A chain x -> Relu -> ... whose every tensor and node is named as YAML would read a number."""
    names = list(ODD_NAMES)
    nodes = [h.make_node("Relu", [a], [b], name=f"n{b}") for a, b in zip(names, names[1:])]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info(names[0], T.FLOAT, [2])],
                     [h.make_tensor_value_info(names[-1], T.FLOAT, [2])])
    return B.write(d, "m.onnx", h.make_model(g, opset_imports=[h.make_opsetid("", 18)]))


def _converted(d: Path, *steps: tuple[str, str]) -> Path:
    """m.onnx with odd names, converted along ``steps`` (from, to); the last file."""
    _odd_names(d)
    for a, b in steps:
        assert cli.main(["convert", str(d / a), str(d / b)]) == 0
    return d / steps[-1][1]


def _back_has_the_names(d: Path) -> None:
    g = onnx.load(str(d / "back.onnx")).graph
    assert [i.name for i in g.input] == ["1e3"] and [o.name for o in g.output] == ["~"], (g.input, g.output)


def _strings(d: Path) -> Path:
    g = h.make_graph([h.make_node("Identity", ["s"], ["y"], name="id")], "g",
                     [h.make_tensor_value_info("s", T.STRING, [2])], [h.make_tensor_value_info("y", T.STRING, [2])])
    np.save(d / "s.npy", np.array(["ab", "c"]))
    return B.write(d, "m.onnx", h.make_model(g, opset_imports=[h.make_opsetid("", 18)]))


def _saved_strings_load_without_pickle(d: Path) -> None:
    with np.load(d / "out.npz", allow_pickle=False) as z:
        assert z["y"].tolist() == ["ab", "c"]


ROUND_TRIPS = [
    Case("round_trips", "convert_names_that_read_as_numbers",
         lambda d: ["run", _converted(d, ("m.onnx", "g.yaml"))], "", rc=0),
    Case("round_trips", "convert_yaml_back_to_onnx_keeps_names",
         lambda d: ["validate", _converted(d, ("m.onnx", "g.yaml"), ("g.yaml", "back.onnx"))], "", rc=0,
         check=_back_has_the_names),
    Case("round_trips", "convert_twice_is_stable",
         lambda d: ["validate", _converted(d, ("m.onnx", "g.yaml"), ("g.yaml", "back.onnx"), ("back.onnx", "g2.yaml"))],
         "", rc=0, check=lambda d: _same_text(d / "g.yaml", d / "g2.yaml")),
    Case("round_trips", "save_string_output_unpickled",
         lambda d: ["run", _strings(d), "--input", f"s={d / 's.npy'}", "--save", d / "out.npz"], "", rc=0,
         check=_saved_strings_load_without_pickle),
    Case("round_trips", "saved_strings_feed_back",
         lambda d: ["run", _strings(d), "--input", f"s={_saved(d)}", "--save", d / "again.npz"], "", rc=0,
         check=lambda d: _same_npz(d / "out.npz", d / "again.npz")),
]


def _same_text(a: Path, b: Path) -> None:
    """Both YAML files read back as the same graph: every name a string, as written."""
    from graphexec.frontend.yaml import load_yaml

    ga, gb = load_yaml(a), load_yaml(b)
    assert ga.inputs == gb.inputs == ["1e3"] and ga.outputs == gb.outputs == ["~"]
    assert [(n.name, n.inputs, n.outputs) for n in ga.nodes] == [(n.name, n.inputs, n.outputs) for n in gb.nodes]


def _saved(d: Path) -> str:
    """The output --save wrote, as the input s of a .npz (unicode, unpickled)."""
    _strings(d)
    assert cli.main(["run", str(d / "m.onnx"), "--input", f"s={d / 's.npy'}", "--save", str(d / "out.npz")]) == 0
    with np.load(d / "out.npz", allow_pickle=False) as z:
        np.savez(d / "in.npz", s=z["y"])
    return f"{d / 'in.npz'}"


def _same_npz(a: Path, b: Path) -> None:
    with np.load(a, allow_pickle=False) as x, np.load(b, allow_pickle=False) as y:
        assert x["y"].tolist() == y["y"].tolist() == ["ab", "c"]


def _external(kind: str) -> Make:
    def make(d: Path) -> list:
        folder = d / "m"
        folder.mkdir()
        path = B.write(folder, "m.onnx", B.external_data_model())
        if kind == "fifo":
            os.mkfifo(folder / "weights.bin")
        elif kind == "folder":
            (folder / "weights.bin").mkdir()
        else:   # a link inside the folder to a FIFO inside it
            os.mkfifo(folder / "pipe")
            (folder / "weights.bin").symlink_to("pipe")
        return ["run", path]
    return make


def _expand(d: Path) -> list:
    g = h.make_graph([h.make_node("Expand", ["x", "s"], ["y"], name="grow")], "g",
                     [h.make_tensor_value_info("x", T.FLOAT, [1]), h.make_tensor_value_info("s", T.INT64, [2])],
                     [h.make_tensor_value_info("y", T.FLOAT, None)])
    np.save(d / "x.npy", np.ones(1, np.float32))
    np.save(d / "s.npy", np.array([1 << 20, 1 << 20], np.int64))
    return ["run", B.write(d, "m.onnx", h.make_model(g, opset_imports=[h.make_opsetid("", 18)])),
            "--input", f"x={d / 'x.npy'}", "--input", f"s={d / 's.npy'}"]


def _big_endian(dtype: str, suffix: str = ".npy") -> Make:
    def make(d: Path) -> list:
        a = np.arange(6, dtype=dtype).reshape(2, 3)
        if suffix == ".npy":
            np.save(d / "x.npy", a)
        else:
            np.savez(d / "x.npz", x=a)
        return ["run", B.write(d, "m.onnx", B.relu_model()), "--input", f"x={d / ('x' + suffix)}"]
    return make


MIB4 = "4398048608256"
LEFTOVERS = [
    Case("leftovers", "external_data_is_a_fifo", _external("fifo"),
         "{d}/m/m.onnx: tensor 'w': external data file 'weights.bin' is a FIFO (named pipe), not a regular file "
         "in {d}/m"),
    Case("leftovers", "external_data_is_a_folder", _external("folder"),
         "{d}/m/m.onnx: tensor 'w': external data file 'weights.bin' is a folder, not a regular file in {d}/m"),
    Case("leftovers", "external_data_links_to_a_fifo", _external("link"),
         "{d}/m/m.onnx: tensor 'w': external data file 'weights.bin' is a FIFO (named pipe), not a regular file "
         "in {d}/m"),
    Case("leftovers", "run_time_expand_to_4_tib", _expand,
         "ACL_ERROR_RT_MEMORY_ALLOCATION (207001): tensor 'y' (output of node grow (Expand)) float32[1048576x1048576] "
         f"needs 4398046511104 bytes at run time: cannot allocate {MIB4} bytes for caching allocator: "
         "1024 of 34359738368 bytes of device memory in use"),
    Case("leftovers", "big_endian_npy_input", _big_endian(">f4"), "", rc=0),
    Case("leftovers", "big_endian_npz_input", _big_endian(">f4", ".npz"), "", rc=0),
    Case("leftovers", "big_endian_float64_input", _big_endian(">f8"), "input 'x' must be float32, got float64"),
]

FRONTEND: list[Case] = [*FUNCTIONS, *ATTRIBUTES, *SCHEMA, *ROUND_TRIPS, *LEFTOVERS]
