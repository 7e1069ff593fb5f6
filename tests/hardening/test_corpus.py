"""The bad-input corpus: every case gives exit 2 and exactly one line naming what is wrong.

Each case writes its input into a fresh folder (``{d}`` in the message) and runs the
command line in-process; a few also run as a real process, to see no traceback.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Callable

import numpy as np
import onnx
import pytest
from onnx import helper

import cli
from hardening import bad_inputs as B
from hardening.round_two import ROUND_TWO

ROOT = Path(__file__).resolve().parents[2]
NEWEST = onnx.defs.onnx_opset_version()
CORRUPT = "not a valid ONNX file (protobuf cannot parse it: Wire format was corrupt)"
mk = helper.make_node


def _onnx(name: str, data: bytes | onnx.ModelProto) -> Callable[[Path], list]:
    return lambda d: ["run", B.write(d, name, data)]


def _if_model() -> onnx.ModelProto:
    """y = If(x > 0) Relu(x) else Neg(x): subgraphs with their own graph names."""
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [])
    branch = lambda op, out: helper.make_graph(  # noqa: E731
        [mk(op, ["x"], [out])], f"{op.lower()}_branch", [], [helper.make_tensor_value_info(out, 1, [])])
    nodes = [mk("Greater", ["x", "zero"], ["c"]),
             mk("If", ["c"], ["y"], then_branch=branch("Relu", "t"), else_branch=branch("Neg", "e"))]
    g = helper.make_graph(nodes, "g", [x], [helper.make_tensor_value_info("y", 1, [])],
                          [helper.make_tensor("zero", onnx.TensorProto.FLOAT, [], [0.0])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _yaml(text: str | bytes, command: str = "run") -> Callable[[Path], list]:
    return lambda d: [command, B.write(d, "g.yaml", text)]


def _feed(array: np.ndarray, name: str = "x") -> Callable[[Path], list]:
    def make(d: Path) -> list:
        np.save(d / "feed.npy", array)
        return ["run", B.write(d, "relu.onnx", B.relu_model()), "--input", f"{name}={d / 'feed.npy'}"]
    return make


def _relu(*args: str) -> Callable[[Path], list]:
    return lambda d: ["run", B.write(d, "relu.onnx", B.relu_model()), *args]


def _device(**fields: object) -> Callable[[Path], list]:
    return lambda d: ["run", B.write(d, "relu.onnx", B.relu_model()), "--device", B.device_profile(d, **fields)]


def _link(d: Path, name: str) -> Path:
    """A link named like a model file that points at /dev/zero (reading it would never end)."""
    (d / name).symlink_to("/dev/zero")
    return d / name


def _cut_npy(d: Path) -> Path:
    np.save(d / "whole.npy", np.zeros((2, 3), np.float32))
    return B.write(d, "cut.npy", (d / "whole.npy").read_bytes()[:-16])


RELU = B.relu_model().SerializeToString()
TWO_NODES = "  - {name: a, op: Relu, inputs: [x], outputs: [t]}\n  - {name: b, op: Relu, inputs: [t], outputs: [y]}\n"
CYCLE = ("  - {name: a, op: Add, inputs: [x, c], outputs: [b]}\n  - {name: b, op: Relu, inputs: [b], outputs: [c]}\n"
         "  - {name: c, op: Relu, inputs: [c], outputs: [y]}\n")

CASES: list[tuple[str, Callable[[Path], list], str]] = [
    # files that are not ONNX models
    ("not_a_file", lambda d: ["run", d / "nope.onnx"], "{d}/nope.onnx: no such file"),
    ("directory", lambda d: ["run", d], "{d}: is a directory, not an ONNX file"),
    ("empty", _onnx("empty.onnx", b""), "{d}/empty.onnx: the file is empty"),
    ("endless_device", lambda d: ["run", _link(d, "zero.onnx")], "{d}/zero.onnx: not a regular file"),
    ("random_bytes", _onnx("noise.onnx", B.random_bytes()), "{d}/noise.onnx: " + CORRUPT),
    ("truncated", _onnx("cut.onnx", B.truncated(RELU)), "{d}/cut.onnx: " + CORRUPT),
    ("bit_flip_wire", _onnx("flip.onnx", B.bit_flipped(RELU, 2, 7)), "{d}/flip.onnx: " + CORRUPT),
    ("bit_flip_op", _onnx("flip.onnx", B.flip_in(RELU, b"Relu", 2, 4)),
     "{d}/flip.onnx: node act (Re|u): no kernel or fallback knows op ai.onnx::Re|u"),
    # ONNX models that are not valid graphs
    ("dangling_input", _onnx("m.onnx", B.model([mk("Add", ["x", "ghost"], ["y"], name="add")])),
     "{d}/m.onnx: node add (Add) reads 'ghost', which no node, input or initializer produces"),
    ("duplicate_output", _onnx("m.onnx", B.model([mk("Relu", ["x"], ["y"], name="r1"),
                                                   mk("Relu", ["x"], ["y"], name="r2")])),
     "{d}/m.onnx: value 'y' is written twice (again by node r2 (Relu))"),
    ("duplicate_graph_output", _onnx("m.onnx", B.model([mk("Relu", ["x"], ["y"], name="r")], outputs=("y", "y"))),
     "{d}/m.onnx: graph output 'y' is listed twice"),
    ("cycle", _onnx("m.onnx", B.model([mk("Add", ["x", "b"], ["a"], name="A"), mk("Relu", ["a"], ["b"], name="B"),
                                        mk("Relu", ["a"], ["y"], name="C")])),
     "{d}/m.onnx: the graph has a cycle: A (Add) -> B (Relu) -> A (Add)"),
    ("initializer_raw_size", _onnx("m.onnx", B.mismatched_initializer(raw=True)),
     "{d}/m.onnx: initializer 'w' is malformed: cannot reshape array of size 4 into shape (2,3)"),
    ("initializer_float_data", _onnx("m.onnx", B.mismatched_initializer(raw=False)),
     "{d}/m.onnx: initializer 'w' is malformed: cannot reshape array of size 4 into shape (2,3)"),
    ("external_data_missing", _onnx("m.onnx", B.external_data_model()),
     "{d}/m.onnx: tensor 'w': external data file 'weights.bin' does not exist in {d}"),
    ("external_data_escapes", _onnx("m.onnx", B.external_data_model("../../etc/passwd")),
     "{d}/m.onnx: tensor 'w': external data file '../../etc/passwd' is outside the model's folder {d}"),
    ("opset_too_new", _onnx("m.onnx", B.model([mk("Relu", ["x"], ["y"])], opset=NEWEST + 1)),
     f"{{d}}/m.onnx: opset {NEWEST + 1} is newer than the installed onnx knows ({NEWEST})"),
    ("negative_dim", _onnx("m.onnx", B.model([mk("Relu", ["x"], ["y"])], shape=[-5, 3])),
     "{d}/m.onnx: input 'x' declares dim 0 as -5; dims must be >= 0 (or -1 for a dynamic one)"),
    ("subgraphs_too_deep", _onnx("m.onnx", B.nested_ifs(25)),
     "{d}/m.onnx: node if0 (If) nests subgraphs more than 24 levels deep; graphexec supports at most 24"),
    ("subgraphs_past_protobuf", _onnx("m.onnx", B.nested_ifs(100)),
     "{d}/m.onnx: not a valid ONNX file: its messages nest deeper than protobuf parses "
     "(subgraphs may nest at most 24 levels)"),
    # found by the fuzzers (test_fuzz.py), each fixed where it belongs
    ("fuzz_subgraph_name_not_utf8", _onnx("m.onnx", B.flip_in(_if_model().SerializeToString(), b"neg_branch", 0, 7)),
     "{d}/m.onnx: not a valid ONNX file: graph name b'\\xeeeg_branch' is not UTF-8 text"),
    ("fuzz_name_not_utf8", _onnx("m.onnx", B.flip_in(RELU, b"\n\x01y\x12", 2, 7)),
     "{d}/m.onnx: not a valid ONNX file: value name b'\\xf9' is not UTF-8 text"),
    ("fuzz_unknown_elem_type", _onnx("m.onnx", B.with_elem_type(29)),
     "{d}/m.onnx: value 'x': element type 29 is not one onnx knows"),
    ("fuzz_unknown_data_type", _onnx("m.onnx", B.with_initializer_type(33)), "{d}/m.onnx: initializer 'w' has data type 33, "
     "which onnx does not know"),
    ("fuzz_required_input_left_out", _onnx("m.onnx", B.model([mk("Mul", ["x", ""], ["y"], name="mul")])),
     "{d}/m.onnx: node mul (Mul) leaves out input 1 ('B'), which Mul requires"),
    ("fuzz_too_many_inputs", _onnx("m.onnx", B.model([mk("Relu", ["x", "x"], ["y"], name="r")])),
     "{d}/m.onnx: node r (Relu) has 2 inputs; Relu-14 takes 1"),
    ("fuzz_attribute_wrong_type", _onnx("m.onnx", B.model([mk("Softmax", ["x"], ["y"], name="sm", axis=1.5)])),
     "{d}/m.onnx: node sm (Softmax) attribute 'axis' is FLOAT, the op takes INT"),
    ("fuzz_yaml_attribute_empty_list", _yaml(B.yaml_graph(replace={"outputs: [y]}": "outputs: [y], attributes: {axis: []}}",
                                                                   "op: Relu": "op: Softmax"})),
     "{d}/g.yaml:8:70: node act (Softmax): attribute 'axis' must be an int, not []"),
    ("fuzz_yaml_attribute_huge_float", _yaml(B.yaml_graph(replace={"outputs: [y]}": "outputs: [y], attributes: "
                                                                   "{axis: 3.4e38}}", "op: Relu": "op: Softmax"})),
     "{d}/g.yaml:8:70: node act (Softmax): attribute 'axis' must be an int, not 3.4e+38"),
    ("fuzz_yaml_dim_past_int64", _yaml(B.yaml_graph(replace={"shape: [2, 3]": "shape: [9223372036854775808]"})),
     "{d}/g.yaml:6:31: tensors.x.shape[0]: must be a size from 0 to 2**63-1, a symbolic name, or null for unknown"),
    ("fuzz_yaml_opset_past_int32", _yaml(B.yaml_graph(replace={"opset: 17": "opset: 2147483648"})),
     "{d}/g.yaml:2:1: opset: Input should be less than or equal to 2147483647"),
    # hostile sizes
    ("dims_overflow_int64", _onnx("m.onnx", B.model([mk("Relu", ["x"], ["y"])], shape=[2**40, 2**40])),
     "ACL_ERROR_RT_MEMORY_ALLOCATION (207001): input 'x' float32[1099511627776x1099511627776] needs "
     "4835703278458516698824704 bytes, its element count overflows int64; device ascend910 has 34359738368 bytes"),
    ("dims_exceed_memory", _onnx("m.onnx", B.model([mk("Relu", ["x"], ["y"])], shape=[2**17, 2**17])),
     "ACL_ERROR_RT_MEMORY_ALLOCATION (207001): input 'x' float32[131072x131072] needs 68719476736 bytes; "
     "device ascend910 has 34359738368 bytes"),
    ("fuzz_empty_but_unholdable", _onnx("m.onnx", B.model([mk("Relu", ["x"], ["y"])], shape=[2**62, 0])),
     "input 'x' float32[4611686018427387904x0] is empty, but its other dims are too big for numpy to hold"),
    ("folded_constant_too_big", _onnx("m.onnx", B.hostile_constant([2**40, 2**40])),
     "ACL_ERROR_RT_MEMORY_ALLOCATION (207001): {d}/m.onnx: tensor 'c' (output of node fill (ConstantOfShape)) "
     "float32[1099511627776x1099511627776] needs 4835703278458516698824704 bytes, its element count overflows "
     "int64; device ascend910 has 34359738368 bytes"),
    # YAML graphs
    ("yaml_missing", lambda d: ["run", d / "nope.yaml"], "{d}/nope.yaml: no such file"),
    ("yaml_endless_device", lambda d: ["run", _link(d, "zero.yaml")], "{d}/zero.yaml: not a regular file"),
    ("yaml_huge_fill", _yaml(B.yaml_graph(replace={"  x: {dtype: float32, shape: [2, 3]}": "  x: {dtype: float32, "
                                                   "shape: [2, 3]}\n  w: {dtype: float32, shape: [65536, 65536], value: 0}"})),
     "{d}/g.yaml:7:46: tensor 'w': float32[65536x65536] needs 17179869184 bytes; a constant filled from a value or "
     "drawn at random may take at most 1073741824 (keep bigger ones in a file)"),
    ("yaml_huge_random", _yaml(B.yaml_graph(replace={"  x: {dtype: float32, shape: [2, 3]}": "  x: {dtype: float32, "
                                                     "shape: [2, 3]}\n  w: {dtype: float32, shape: [2147483648, "
                                                     "2147483648], random: {seed: 1}}"})),
     "{d}/g.yaml:7:56: tensor 'w': float32[2147483648x2147483648] needs 18446744073709551616 bytes; a constant "
     "filled from a value or drawn at random may take at most 1073741824 (keep bigger ones in a file)"),
    ("yaml_not_yaml", _yaml("name: [relu\n"), "{d}/g.yaml:2:1: invalid YAML: expected ',' or ']', but got '<stream end>'"),
    ("yaml_binary", _yaml(B.random_bytes(64)), "{d}/g.yaml: not a UTF-8 text file"),
    ("yaml_empty", _yaml(""), "{d}/g.yaml:1:1: the file is empty; a graph needs at least name, outputs and nodes"),
    ("yaml_not_mapping", _yaml("- relu\n"),
     "{d}/g.yaml:1:1: a graph file is a mapping with name, inputs, outputs, tensors and nodes"),
    ("yaml_wrong_type", _yaml(B.yaml_graph(replace={"shape: [2, 3]": "shape: big"})),
     "{d}/g.yaml:6:23: tensors.x.shape: Input should be a valid list"),
    ("yaml_missing_field", _yaml(B.yaml_graph(replace={"outputs: [y]\n": ""})), "{d}/g.yaml:1:1: outputs: Field required"),
    ("yaml_unknown_op", _yaml(B.yaml_graph(replace={"op: Relu": "op: Frobnicate"})),
     "{d}/g.yaml:8:17: node 'act': unknown op 'Frobnicate'; closest known: Concat"),
    ("yaml_cycle", _yaml(B.yaml_graph(CYCLE)), "{d}/g.yaml:8:5: the graph has a cycle: a (Add) -> b (Relu) -> a (Add)"),
    ("yaml_cycle_validate", _yaml(B.yaml_graph(CYCLE), "validate"),
     "{d}/g.yaml:8:5: the graph has a cycle: a (Add) -> b (Relu) -> a (Add)"),
    ("yaml_dangling", _yaml(B.yaml_graph(TWO_NODES, {"inputs: [t]": "inputs: [u]"})),
     "{d}/g.yaml:9:34: node b (Relu) reads 'u', which no node, input or tensor defines"),
    # feeds
    ("feed_wrong_name", _feed(np.zeros((2, 3), np.float32), "z"), "feed 'z' is not an input of the graph; inputs are: x"),
    ("feed_wrong_dtype", _feed(np.zeros((2, 3), np.float64)), "input 'x' must be float32, got float64"),
    ("feed_wrong_rank", _feed(np.zeros(6, np.float32)), "input 'x' must have rank 2 (shape [2,3]), got shape [6]"),
    ("feed_wrong_dim", _feed(np.zeros((2, 4), np.float32)), "input 'x' dim 1 must be 3, got 4 (shape [2,4])"),
    ("feed_not_npy", lambda d: ["run", B.write(d, "m.onnx", B.relu_model()), "--input", f"x={B.write(d, 'x.npy', 'hi')}"],
     "--input x: {d}/x.npy: not a .npy array file (write one with numpy.save)"),
    ("feed_pickled", _feed(np.array([{"a": 1}], dtype=object)),
     "--input x: {d}/feed.npy: holds Python objects, which are not loaded; save a numeric array"),
    ("feed_truncated_npy", lambda d: _relu("--input", f"x={_cut_npy(d)}")(d),
     "--input x: {d}/cut.npy: not a readable .npy array file (Failed to read all data for array. Expected (2, 3) = "
     "6 elements, could only read 2 elements. (file seems not fully written?))"),
    ("feed_endless_device", lambda d: _relu("--input", f"x={_link(d, 'zero.npy')}")(d),
     "--input x: {d}/zero.npy: not a regular file"),
    ("shape_not_an_input", _relu("--shape", "z=2,3"),
     "a shape is given for 'z', which is not an input of the graph; inputs are: x"),
    ("shape_wrong_dim", _relu("--shape", "x=2,4"), "input 'x' dim 1 must be 3, got 4 (shape [2,4])"),
    ("shape_not_ints", _relu("--shape", "x=2,a"), "--shape x=2,a: dims must be integers separated by commas"),
    # device profiles
    ("device_zero_cores", _device(ai_cores=0, vector_cores=0),
     "{d}/device.yaml: field 'ai_cores': Input should be greater than or equal to 1 (got 0); "
     "field 'vector_cores': Input should be greater than or equal to 1 (got 0)"),
    ("device_negative_memory", _device(hbm_capacity_bytes=-1),
     "{d}/device.yaml: field 'hbm_capacity_bytes': Input should be greater than or equal to 1 (got -1)"),
    ("device_zero_bandwidth", _device(hbm_bandwidth_gbps=0.0),
     "{d}/device.yaml: field 'hbm_bandwidth_gbps': Input should be greater than 0 (got 0.0)"),
    ("device_negative_launch", _device(launch_cost_us=-2.5),
     "{d}/device.yaml: field 'launch_cost_us': Input should be greater than 0 (got -2.5)"),
    ("device_negative_peak", _device(peak_tflops__cube__float16=-1.0),
     "{d}/device.yaml: field 'peak_tflops.cube.float16': Input should be greater than 0 (got -1.0)"),
    ("device_endless_file", lambda d: _relu("--device", _link(d, "zero.yaml"))(d),
     "{d}/zero.yaml: cannot read device profile: not a regular file"),
    ("device_zero_streams", _device(max_streams=0),
     "{d}/device.yaml: field 'max_streams': Input should be greater than or equal to 1 (got 0)"),
    # --streams
    ("streams_0", _relu("--streams", "0"), "streams must be >= 1, got 0"),
    ("streams_-1", _relu("--streams", "-1"), "streams must be >= 1, got -1"),
    ("streams_100000", _relu("--streams", "100000"), "streams=100000 exceeds the 2048 streams device ascend910 allows"),
    ("streams_word", _relu("--streams", "many"), "--streams 'many': must be an integer >= 1 or 'auto'"),
    ("compare_streams_0", lambda d: ["compare", B.write(d, "m.onnx", B.relu_model()), "--streams", "1,0"],
     "streams must be >= 1, got 0"),
    ("plan_streams_-1", lambda d: ["plan", B.write(d, "m.onnx", B.relu_model()), "--streams", "-1"],
     "streams must be >= 1, got -1"),
    # outputs that cannot be written
    ("save_into_missing_folder", lambda d: _relu("--save", str(d / "no" / "o.npz"))(d),
     "--save {d}/no/o.npz: folder {d}/no does not exist"),
    ("trace_is_a_folder", lambda d: _relu("--trace", str(d))(d), "--trace {d}: is a folder; give a file name"),
    # command-line usage (argparse): one line too
    ("usage_no_model", lambda d: ["run"],
     "graphexec run: error: the following arguments are required: model (see graphexec run --help)"),
    ("usage_bad_policy", _relu("--policy", "fastest"),
     "graphexec run: error: argument --policy: invalid choice: 'fastest' (choose from 'single', 'ge', 'chains', "
     "'list', 'auto') (see graphexec run --help)"),
    ("usage_unknown_command", lambda d: ["frobnicate"],
     "graphexec: error: argument command: invalid choice: 'frobnicate' (choose from 'run', 'compare', 'plan', "
     "'validate', 'convert', 'devices', 'inspect', 'sweep', 'view', 'diff', 'decode', 'calibrate', "
     "'completion') (see graphexec --help)"),
    ("convert_bad_suffix", lambda d: ["convert", B.write(d, "m.onnx", B.relu_model()), d / "out.txt"],
     "{d}/out.txt: can write .yaml, .yml or .onnx, not .txt"),
]


def run_cli(args: list, capsys: pytest.CaptureFixture) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of the command line run in this process."""
    try:
        rc = cli.main([str(a) for a in args])
    except SystemExit as e:  # argparse exits on its own
        rc = e.code
    out, err = capsys.readouterr()
    return rc, out, err


def expected(args: list, message: str, folder: Path) -> str:
    """The stderr a case must give: ``validate`` lists problems bare, argparse names its command."""
    bare = (args and args[0] == "validate") or message.startswith("graphexec")
    return ("" if bare else "graphexec: error: ") + message.format(d=folder) + "\n"


@pytest.mark.parametrize("make,message", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_gives_its_line_and_exit_2(make, message, tmp_path, capsys):
    args = make(tmp_path)
    rc, out, err = run_cli(args, capsys)
    assert (rc, err) == (2, expected(args, message, tmp_path))
    assert out == ""


@pytest.mark.parametrize("case", ["random_bytes", "yaml_not_yaml", "feed_wrong_dim", "streams_100000",
                                  "dims_overflow_int64", "usage_no_model"])
def test_as_a_process_no_traceback(case, tmp_path):
    make, message = next(c[1:] for c in CASES if c[0] == case)
    args = make(tmp_path)
    p = subprocess.run([sys.executable, str(ROOT / "cli.py"), *map(str, args)],
                       capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert (p.returncode, p.stderr) == (2, expected(args, message, tmp_path))


@pytest.mark.parametrize("case", ROUND_TWO, ids=[c.name for c in ROUND_TWO])
def test_issue_21_case_gives_its_line_and_exit_code(case, tmp_path, capsys):
    """Confinement, outputs, memory and odd types (round_two.py); conftest reports them per class."""
    args = case.make(tmp_path)
    rc, out, err = run_cli(args, capsys)
    assert (rc, err) == (case.rc, expected(args, case.message, tmp_path))
    assert out == ""


@pytest.mark.parametrize("name", ["yaml_alias_bomb", "yaml_3000_brackets", "yaml_self_alias", "onnx_meta_3000_brackets",
                                  "default_input_16gib", "yaml_npz_header_past_budget"])
def test_issue_21_as_a_process_no_traceback(name, tmp_path):
    case = next(c for c in ROUND_TWO if c.name == name)
    args = case.make(tmp_path)
    p = subprocess.run([sys.executable, str(ROOT / "cli.py"), *map(str, args)],
                       capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert (p.returncode, p.stderr) == (case.rc, expected(args, case.message, tmp_path))


def test_every_class_has_its_cases():
    counts = {cls: sum(c.cls == cls for c in ROUND_TWO) for cls in ("confinement", "outputs", "memory", "odd types")}
    assert all(n >= 8 for n in counts.values()), counts
    assert len({c.name for c in ROUND_TWO} | {c[0] for c in CASES}) == len(ROUND_TWO) + len(CASES)  # names unique
