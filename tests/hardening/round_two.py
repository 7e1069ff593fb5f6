"""Issue 21's classes of bad input, each case with its exact line and exit code.

Every maker gets a fresh folder ``d`` and returns the command line; the model usually
lives in ``d/m`` so that ``d`` itself is "outside the model's folder". The corpus
(test_corpus.py) runs them all and reports how many each class holds.
"""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path
from typing import Callable, NamedTuple

import numpy as np
import onnx
from onnx import TensorProto, helper

from hardening import bad_inputs as B

Make = Callable[[Path], list]
BUDGET = "more than the host budget of 8589934592 bytes (GRAPHEXEC_HOST_BUDGET)"


class Case(NamedTuple):
    cls: str
    name: str
    make: Make
    message: str
    rc: int = 2
    check: Callable[[Path], None] | None = None   # a clean run (rc 0, no message): what it wrote


def _folder(d: Path) -> Path:
    (d / "m").mkdir(exist_ok=True)
    return d / "m"


def _yaml_const(entry: str, extra: str = "", command: str = "run") -> Make:
    """A YAML graph in d/m adding the constant ``w`` (float32[2,3]) given by ``entry``."""
    text = B.yaml_graph("  - {name: act, op: Add, inputs: [x, w], outputs: [y]}\n",
                        {"shape: [2, 3]}\n": f"shape: [2, 3]}}\n  w: {{dtype: float32, shape: [2, 3], {entry}}}\n"})
    return lambda d: [command, B.write(_folder(d), "g.yaml", text + extra)]


def _with(setup: Callable[[Path], object], make: Make) -> Make:
    def both(d: Path) -> list:
        setup(d)
        return make(d)
    return both


def _npy(d: Path, name: str, array: np.ndarray) -> None:
    np.save(d / name, array, allow_pickle=True)


def _npy_header(path: Path, shape: tuple[int, ...], dtype: str = "<f4") -> Path:
    """A .npy file whose header claims ``shape`` and which holds 16 bytes of data."""
    with open(path, "wb") as f:
        np.lib.format.write_array_header_1_0(f, {"descr": dtype, "fortran_order": False, "shape": shape})
        f.write(bytes(16))
    return path


def _npz_header(path: Path, member: str, shape: tuple[int, ...]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z, z.open(member + ".npy", "w") as m:
        np.lib.format.write_array_header_1_0(m, {"descr": "<f4", "fortran_order": False, "shape": shape})
        m.write(bytes(16))
    return path


def _onnx_meta(graph: dict | None = None, node: dict | None = None, raw: dict | None = None) -> Make:
    """relu_model in d/m with graphexec metadata (``raw``: unencoded text per key)."""
    def make(d: Path) -> list:
        m = B.relu_model()
        for key, value in (graph or {}).items():
            m.metadata_props.add(key="graphexec." + key, value=json.dumps(value))
        for key, value in (raw or {}).items():
            m.metadata_props.add(key="graphexec." + key, value=value)
        for key, value in (node or {}).items():
            m.graph.node[0].metadata_props.add(key="graphexec." + key, value=json.dumps(value))
        return ["run", B.write(_folder(d), "m.onnx", m)]
    return make


def _external(d: Path, location: str, dims: list[int]) -> list:
    t = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=dims, data_location=TensorProto.EXTERNAL)
    t.external_data.add(key="location", value=location)
    m = B.model([helper.make_node("Add", ["x", "w"], ["y"], name="add")], initializers=[t])
    return ["run", B.write(_folder(d), "m.onnx", m)]


def _relu(*args: str) -> Make:
    return lambda d: ["run", B.write(d, "relu.onnx", B.relu_model()), *[a.format(d=d) for a in args]]


def _relu_input(*args: str) -> Make:
    def make(d: Path) -> list:
        np.save(d / "x.npy", np.ones((2, 3), np.float32))
        return _relu("--input", "x={d}/x.npy", *args)(d)
    return make


def _big_input(d: Path) -> list:
    m = B.model([helper.make_node("Relu", ["x"], ["y"])], shape=[4, 1024, 1024, 1024])
    return ["run", B.write(d, "m.onnx", m)]


def _initializer(dims: list[int]) -> Make:
    t = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=dims)
    t.raw_data = np.zeros(6, np.float32).tobytes()
    return lambda d: ["run", B.write(d, "m.onnx", B.model([helper.make_node("Add", ["x", "w"], ["y"], name="add")],
                                                         initializers=[t]))]


def _yaml_with_npz(d: Path) -> Path:
    np.savez(_folder(d) / "w.npz", w=np.ones((2, 3), np.float32))
    return _yaml_const("file: w.npz")(d)[1]


def _yaml_with_big_npz(d: Path) -> Path:
    """A YAML graph whose 20x30 constant lives in w.npz: converted to w.yaml it would go to w.npz."""
    np.savez(_folder(d) / "w.npz", w=np.ones((20, 30), np.float32))
    text = B.yaml_graph("  - {name: act, op: Relu, inputs: [x], outputs: [y]}\n",
                        {"shape: [2, 3]}\n": "shape: [2, 3]}\n  w: {dtype: float32, shape: [20, 30], file: w.npz}\n"})
    return B.write(_folder(d), "g.yaml", text + "  - {name: keep, op: Relu, inputs: [w], outputs: [z]}\n")


def _sparse(d: Path, name: str, size: int) -> Path:
    """A file of ``size`` bytes that takes no disk (a hole)."""
    with open(d / name, "wb") as f:
        f.truncate(size)
    return d / name



def _bomb(levels: int = 9) -> str:
    """The "billion laughs": each anchor a list of nine aliases of the previous one."""
    lines = ['lol0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"lol{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


OUTSIDE = "is outside the model's folder {d}/m"
W = "{d}/m/g.yaml:7:38: tensor 'w': "
NOT_REGULAR = "exists and is not a regular file (a device, a pipe or a socket); give a file name"
READS = "an output may not replace a file the command reads"
SCHED = {"streams": [{"name": "s", "priority": 0, "tasks": [{"run": "act"}]}]}

CONFINEMENT = [
    Case("confinement", "yaml_file_dotdot", _with(lambda d: np.save(d / "w.npy", np.ones((2, 3), np.float32)),
                                                  _yaml_const("file: ../w.npy")), W + "file '../w.npy' " + OUTSIDE),
    Case("confinement", "yaml_file_dotdot_missing", _yaml_const("file: ../w.npy"), W + "file '../w.npy' " + OUTSIDE),
    Case("confinement", "yaml_file_out_and_back", _with(lambda d: np.save(_folder(d) / "w.npy", np.ones((2, 3), np.float32)),
                                                        _yaml_const("file: ../m/w.npy")),  # outside, even for a moment
         W + "file '../m/w.npy' " + OUTSIDE),
    Case("confinement", "yaml_file_absolute", _yaml_const("file: /etc/w.npy"), W + "file '/etc/w.npy' " + OUTSIDE),
    Case("confinement", "yaml_file_symlink_out",
         _with(lambda d: (np.save(d / "secret.npy", np.ones((2, 3), np.float32)),
                          _folder(d).joinpath("w.npy").symlink_to(d / "secret.npy")), _yaml_const("file: w.npy")),
         W + "file 'w.npy' " + OUTSIDE),
    Case("confinement", "yaml_file_symlink_folder_out",
         _with(lambda d: (np.save(d / "w.npy", np.ones((2, 3), np.float32)), _folder(d).joinpath("data").symlink_to(d)),
               _yaml_const("file: data/w.npy")), W + "file 'data/w.npy' " + OUTSIDE),
    Case("confinement", "yaml_file_pickle",
         _with(lambda d: _npy(_folder(d), "w.npy", np.array([{"a": 1}] * 6, dtype=object).reshape(2, 3)),
               _yaml_const("file: w.npy")), W + "file 'w.npy': holds Python objects, which are not loaded; "
                                               "save a numeric array"),
    Case("confinement", "yaml_npz_member_pickle",
         _with(lambda d: np.savez(_folder(d) / "w.npz", w=np.array([None] * 6, dtype=object).reshape(2, 3)),
               _yaml_const("file: w.npz")), W + "file 'w.npz': holds Python objects, which are not loaded; "
                                               "save a numeric array"),
    Case("confinement", "yaml_file_fifo", _with(lambda d: os.mkfifo(_folder(d) / "w.npy"), _yaml_const("file: w.npy")),
         W + "file 'w.npy': not a regular file"),
    Case("confinement", "yaml_options_device_outside", _yaml_const("value: 1", "options: {device: ../dev.yaml}\n"),
         "{d}/m/g.yaml:10:11: device profile '../dev.yaml' " + OUTSIDE),
    Case("confinement", "onnx_meta_device_outside", _onnx_meta({"options": {"device": "../dev.yaml"}}),
         "{d}/m/m.onnx: metadata graphexec.options: device: device profile '../dev.yaml' " + OUTSIDE),
    Case("confinement", "onnx_meta_device_absolute", _onnx_meta({"options": {"device": "/etc/dev.yaml"}}),
         "{d}/m/m.onnx: metadata graphexec.options: device: device profile '/etc/dev.yaml' " + OUTSIDE),
    Case("confinement", "external_data_symlink_out",
         _with(lambda d: (B.write(d, "secret.bin", bytes(24)), _folder(d).joinpath("w.bin").symlink_to(d / "secret.bin")),
               lambda d: _external(d, "w.bin", [2, 3])),
         "{d}/m/m.onnx: tensor 'w': external data file 'w.bin' " + OUTSIDE),
]

OUTPUTS = [
    Case("outputs", "save_char_device", _relu("--save", "/dev/null"), "--save /dev/null: " + NOT_REGULAR),
    Case("outputs", "trace_fifo", _with(lambda d: os.mkfifo(d / "t.json"), _relu("--trace", "{d}/t.json")),
         "--trace {d}/t.json: " + NOT_REGULAR),
    Case("outputs", "trace_is_the_model", _relu("--trace", "{d}/relu.onnx"),
         "--trace {d}/relu.onnx: is the model; " + READS),
    Case("outputs", "save_is_the_input", _relu_input("--save", "{d}/x.npy"),
         "--save {d}/x.npy: is the input x; " + READS),
    Case("outputs", "save_hard_link_to_the_model",
         _with(lambda d: (B.write(d, "relu.onnx", B.relu_model()), os.link(d / "relu.onnx", d / "o.npz")),
               _relu("--save", "{d}/o.npz")),
         "--save {d}/o.npz: is the model; " + READS),
    Case("outputs", "trace_symlink_to_the_input",
         _with(lambda d: (d / "t.json").symlink_to(d / "x.npy"), _relu_input("--trace", "{d}/t.json")),
         "--trace {d}/t.json: is the input x; " + READS),
    Case("outputs", "save_and_trace_one_file", _relu("--save", "{d}/o", "--trace", "{d}/o"),
         "--trace {d}/o: is also the target of --save; give each output its own name"),
    Case("outputs", "trace_inside_profile", _with(lambda d: (d / "p").mkdir(),
                                                  _relu("--trace", "{d}/p/timeline.json", "--profile", "{d}/p")),
         "--profile {d}/p (its timeline.json): is also the target of --trace; give each output its own name"),
    Case("outputs", "save_is_the_device_profile",
         lambda d: _relu("--device", str(B.device_profile(d)), "--save", "{d}/device.yaml")(d),
         "--save {d}/device.yaml: is the device profile; " + READS),
    Case("outputs", "profile_is_a_file", _relu("--profile", "{d}/relu.onnx"),
         "--profile {d}/relu.onnx: exists and is not a folder"),
    Case("outputs", "convert_onto_itself", lambda d: ["convert", B.write(d, "m.onnx", B.relu_model()), d / "m.onnx"],
         "{d}/m.onnx: is the graph being converted; " + READS),
    Case("outputs", "save_over_the_models_npz", lambda d: ["run", _yaml_with_npz(d), "--save", d / "m" / "w.npz"],
         "--save {d}/m/w.npz: is a file the model reads; " + READS),
    Case("outputs", "trace_over_external_data",
         lambda d: (B.write(_folder(d), "w.bin", np.ones(6, np.float32).tobytes()),
                    _external(d, "w.bin", [2, 3]) + ["--trace", d / "m" / "w.bin"])[1],
         "--trace {d}/m/w.bin: is a file the model reads; " + READS),
    Case("outputs", "convert_npz_over_the_models_npz", lambda d: ["convert", _yaml_with_big_npz(d), d / "m" / "w.yaml"],
         "{d}/m/w.npz: is a file the graph was read from; " + READS),
]

MEMORY = [
    Case("memory", "yaml_alias_bomb", lambda d: ["run", B.write(d, "g.yaml", B.RELU_YAML + _bomb())],
         "{d}/g.yaml:14:7: invalid YAML: aliases expand this node to 597871 nodes, more than 100000 beyond what "
         "the file holds (an alias bomb)"),
    Case("memory", "yaml_alias_bomb_validate", lambda d: ["validate", B.write(d, "g.yaml", B.RELU_YAML + _bomb())],
         "{d}/g.yaml:14:7: invalid YAML: aliases expand this node to 597871 nodes, more than 100000 beyond what "
         "the file holds (an alias bomb)"),
    Case("memory", "yaml_npy_header_4tib", _with(lambda d: _npy_header(_folder(d) / "w.npy", (2**40,)),
                                                 _yaml_const("file: w.npy")),
         W + "file 'w.npy': its header declares float32[1099511627776], which needs 4398046511104 bytes, " + BUDGET),
    Case("memory", "yaml_npz_header_past_budget", _with(lambda d: _npz_header(_folder(d) / "w.npz", "w", (2**16, 2**16)),
                                                        _yaml_const("file: w.npz")),
         W + "file 'w.npz': its header declares float32[65536x65536], which needs 17179869184 bytes, " + BUDGET),
    Case("memory", "yaml_npz_shape_not_declared", _with(lambda d: _npz_header(_folder(d) / "w.npz", "w", (1024, 1024)),
                                                        _yaml_const("file: w.npz")),
         W + "w.npz holds shape [1024, 1024], the tensor is declared [2, 3]"),
    Case("memory", "input_npy_header_4tib", lambda d: _relu("--input", f"x={_npy_header(d / 'x.npy', (2**40,))}")(d),
         "--input x: {d}/x.npy: its header declares float32[1099511627776], which needs 4398046511104 bytes; "
         "device ascend910 has 34359738368 bytes"),
    Case("memory", "input_npy_header_past_budget",
         lambda d: _relu("--input", f"x={_npy_header(d / 'x.npy', (2**16, 2**16))}")(d),
         "--input x: {d}/x.npy: its header declares float32[65536x65536], which needs 17179869184 bytes, " + BUDGET),
    Case("memory", "external_tensor_40gib", lambda d: (B.write(_folder(d), "w.bin", bytes(64)),
                                                       _external(d, "w.bin", [10, 1024, 1024, 1024]))[1],
         "{d}/m/m.onnx: tensor 'w': its dims declare [10, 1024, 1024, 1024], which needs 42949672960 bytes, "
         + BUDGET + "; the external data is not read"),
    Case("memory", "default_input_16gib", _big_input,
         "input 'x' float32[4x1024x1024x1024] needs 17179869184 bytes, " + BUDGET),
    Case("memory", "yaml_file_past_budget", lambda d: ["run", _sparse(d, "g.yaml", 64 << 20)],
         "{d}/g.yaml: loading 67108864 bytes of YAML takes about 200x that, so it needs 13421772800 bytes, "
         + BUDGET),
    Case("memory", "onnx_file_past_budget", lambda d: ["run", _sparse(d, "m.onnx", 5 << 30)],
         "{d}/m.onnx: loading 5368709120 bytes of ONNX takes about 2x that, so it needs 10737418240 bytes, "
         + BUDGET),
]

ODD_TYPES = [
    Case("odd types", "yaml_self_alias", lambda d: ["run", B.write(d, "g.yaml", B.RELU_YAML + "loop: &a [1, *a]\n")],
         "{d}/g.yaml:9:14: invalid YAML: the alias *a is used inside the node it names, so the document would "
         "contain itself"),
    Case("odd types", "yaml_self_alias_mapping",
         lambda d: ["validate", B.write(d, "g.yaml", B.RELU_YAML + "loop: &a {again: *a}\n")],
         "{d}/g.yaml:9:18: invalid YAML: the alias *a is used inside the node it names, so the document would "
         "contain itself"),
    Case("odd types", "yaml_3000_brackets", lambda d: ["run", B.write(d, "g.yaml", "name: " + "[" * 3000 + "]" * 3000)],
         "{d}/g.yaml:1:106: invalid YAML: lists and mappings nest more than 100 levels deep"),
    Case("odd types", "yaml_3000_mappings", lambda d: ["run", B.write(d, "g.yaml", "name: " + "{a: " * 3000 + "1"
                                                                      + "}" * 3000)],
         "{d}/g.yaml:1:400: invalid YAML: lists and mappings nest more than 100 levels deep"),
    Case("odd types", "yaml_shape_bool", lambda d: ["run", B.write(d, "g.yaml", B.yaml_graph(
        replace={"shape: [2, 3]": "shape: [true, 3]"}))],
         "{d}/g.yaml:6:31: tensors.x.shape[0]: must be a size from 0 to 2**63-1, a symbolic name, or null for unknown"),
    Case("odd types", "yaml_priority_bool", lambda d: ["run", B.write(d, "g.yaml", B.yaml_graph(
        replace={"outputs: [y]}": "outputs: [y], priority: true}"}))],
         "{d}/g.yaml:8:54: nodes[0].priority: Input should be a valid integer"),
    Case("odd types", "yaml_streams_float", _yaml_const("value: 1", "options: {streams: 2.0}\n"),
         "{d}/m/g.yaml:10:11: options.streams: must be an int >= 1 or 'auto'"),
    Case("odd types", "yaml_fold_string", _yaml_const("value: 1", "options: {fold: 'yes'}\n"),
         "{d}/m/g.yaml:10:11: options.fold: Input should be a valid boolean"),
    Case("odd types", "initializer_dim_minus_1", _initializer([-1, 3]),
         "{d}/m.onnx: initializer 'w' declares dim 0 as -1; an initializer's dims must be >= 0"),
    Case("odd types", "onnx_meta_streams_word", _onnx_meta({"options": {"streams": "many"}}),
         "{d}/m/m.onnx: metadata graphexec.options: streams: must be an int >= 1 or 'auto'"),
    Case("odd types", "onnx_meta_fold_string", _onnx_meta({"options": {"fold": "no"}}),
         "{d}/m/m.onnx: metadata graphexec.options: fold: Input should be a valid boolean"),
    Case("odd types", "onnx_meta_unknown_option", _onnx_meta({"options": {"stream": 2}}),
         "{d}/m/m.onnx: metadata graphexec.options: stream: Extra inputs are not permitted"),
    Case("odd types", "onnx_meta_options_not_object", _onnx_meta({"options": [4]}),
         "{d}/m/m.onnx: metadata graphexec.options: must be a JSON object"),
    Case("odd types", "onnx_meta_schedule_unknown_node",
         _onnx_meta({"schedule": {"streams": [{"name": "s", "tasks": [{"run": "act"}, {"run": "ghost"}]}]}}),
         "{d}/m/m.onnx: metadata graphexec.schedule: stream 's' runs unknown node 'ghost'"),
    Case("odd types", "onnx_meta_schedule_priority_99",
         _onnx_meta({"schedule": {"streams": [{**SCHED["streams"][0], "priority": 99}]}}),
         "{d}/m/m.onnx: metadata graphexec.schedule: streams[0].priority: Input should be less than or equal to 7"),
    Case("odd types", "onnx_meta_schedule_wait_unrecorded",
         _onnx_meta({"schedule": {"streams": [{"name": "s", "tasks": [{"wait": "e"}, {"run": "act"}]}]}}),
         "{d}/m/m.onnx: metadata graphexec.schedule: stream 's' waits for event 'e', which no stream records"),
    Case("odd types", "onnx_meta_node_priority_99", _onnx_meta(node={"priority": 99}),
         "{d}/m/m.onnx: node act (Relu): metadata graphexec.priority: Input should be less than or equal to 7"),
    Case("odd types", "onnx_meta_node_priority_bool", _onnx_meta(node={"priority": True}),
         "{d}/m/m.onnx: node act (Relu): metadata graphexec.priority: Input should be a valid integer"),
    Case("odd types", "onnx_meta_stream_label_number", _onnx_meta(node={"stream_label": 3}),
         "{d}/m/m.onnx: node act (Relu): metadata graphexec.stream_label: Input should be a valid string"),
    Case("odd types", "onnx_meta_3000_brackets", _onnx_meta(raw={"options": "[" * 3000 + "]" * 3000}),
         "{d}/m/m.onnx: metadata graphexec.options: nests deeper than Python's JSON parser goes"),
    Case("odd types", "onnx_meta_description_number", _onnx_meta({"description": 5}),
         "{d}/m/m.onnx: metadata graphexec.description: must be a string, not int"),
    Case("odd types", "yaml_key_bool", lambda d: ["run", B.write(d, "g.yaml", B.RELU_YAML + "true: 1\n")],
         "{d}/g.yaml:9:1: mapping key 'true' is read as a boolean, not text; quote it"),
    Case("odd types", "yaml_tensor_named_by_a_number", lambda d: ["run", B.write(d, "g.yaml", B.RELU_YAML.replace(
        "  x: {dtype", "  5: {dtype: float32}\n  x: {dtype"))],
         "{d}/g.yaml:6:3: mapping key '5' is read as an integer, not text; quote it"),
    Case("odd types", "yaml_duplicate_anchor", lambda d: ["run", B.write(d, "g.yaml", B.RELU_YAML + "a: &x 1\nb: &x 2\n")],
         "{d}/g.yaml:10:4: invalid YAML: found duplicate anchor 'x' (first at line 9)"),
    Case("odd types", "yaml_dim_float", lambda d: ["run", B.write(d, "g.yaml", B.yaml_graph(
        replace={"shape: [2, 3]": "shape: [2.0, 3]"}))],
         "{d}/g.yaml:6:31: tensors.x.shape[0]: must be a size from 0 to 2**63-1, a symbolic name, or null for unknown"),
    Case("odd types", "yaml_seed_bool", lambda d: ["run", B.write(d, "g.yaml", B.yaml_graph(replace={
        "shape: [2, 3]}\n": "shape: [2, 3]}\n  w: {dtype: float32, shape: [2], random: {seed: true}}\n"}))],
         "{d}/g.yaml:7:44: tensors.w.random.seed: Input should be a valid integer"),
]

ROUND_TWO: list[Case] = CONFINEMENT + OUTPUTS + MEMORY + ODD_TYPES
