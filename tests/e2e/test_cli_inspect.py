"""``graphexec inspect`` (and ``gx.inspect``), and what ``run`` makes when no input is given:
the shapes it printed, one size per symbolic dim name, valid ids, masks of ones, and a
failure on made inputs that names the dims to set. Typed as a user types it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import graphexec as gx

ROOT = Path(__file__).resolve().parents[2]
DECODER = str(ROOT / "models" / "tiny_decoder.onnx")


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "graphexec", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=300)


def test_inspect_names_inputs_outputs_symbolic_dims_ops_kernels_and_weights():
    p = cli("inspect", DECODER)
    assert p.returncode == 0, p.stderr
    assert "input input_ids: int64[1,sequence]  (symbolic: sequence)" in p.stdout
    assert "input past_key_values.0.key: float32[1,2,past,8]  (symbolic: past)" in p.stdout
    assert "output logits: float32[1,sequence,64]" in p.stdout and "opsets ai.onnx 17" in p.stdout
    assert "MatMul 17" in p.stdout and "fallback (onnx.reference): none" in p.stdout
    doc = json.loads(cli("inspect", DECODER, "--json").stdout)
    assert doc["inputs"][0] == {"name": "input_ids", "kind": "tensor", "dtype": "int64", "shape": [1, "sequence"],
                                "symbolic": ["sequence"]}
    assert doc["opsets"] == {"ai.onnx": 17} and doc["ops"]["MatMul"] == 17 and doc["fallback"] == []
    graph = gx.load(DECODER)
    assert doc["weight_bytes"] == sum(v.const.nbytes for v in graph.values.values() if v.const is not None)
    assert gx.inspect(graph).to_dict() == {k: v for k, v in doc.items() if k not in ("schema_version", "command")}


def _model(tmp_path: Path, nodes, inputs, inits=()) -> str:
    graph = helper.make_graph(nodes, "m", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              list(inits))
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return str(path)


def test_inspect_lists_the_ops_that_fall_back(tmp_path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    path = _model(tmp_path, [helper.make_node("Det", ["x2"], ["y"]), helper.make_node("Expand", ["x", "s"], ["x2"])],
                  [x], [numpy_helper.from_array(np.array([3, 3], np.int64), "s")])
    found = gx.inspect(path)   # Det has no own kernel: onnx.reference runs it
    assert found.own_kernels == ["Expand"] and found.fallback == ["Det"] and found.unsupported == []
    assert found.num_weights == 1 and found.weight_bytes == 16
    p = cli("inspect", path)
    assert "own kernels: 1 op types; fallback (onnx.reference): Det" in p.stdout


def test_run_prints_the_shapes_it_made_ids_valid_masks_ones_one_size_per_dim_name(tmp_path):
    ids = helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"])
    mask = helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "seq"])
    table = numpy_helper.from_array(np.arange(12, dtype=np.float32).reshape(4, 3), "table")   # 4 rows: ids 0..3
    nodes = [helper.make_node("Gather", ["table", "input_ids"], ["e"]), helper.make_node("Cast", ["attention_mask"],
             ["m"], to=TensorProto.FLOAT), helper.make_node("Unsqueeze", ["m", "ax"], ["m3"]),
             helper.make_node("Mul", ["e", "m3"], ["y"])]
    ax = numpy_helper.from_array(np.array([-1], np.int64), "ax")
    path = _model(tmp_path, nodes, [ids, mask], [table, ax])
    out = tmp_path / "out.npz"
    p = cli("run", path, "--shape", "input_ids=2,6", "--save", str(out))
    assert p.returncode == 0, p.stderr
    assert "input input_ids: int64[2,6]" in p.stdout
    assert "input attention_mask: int64[2,6] (ones (a mask); batch=2, seq=6)" in p.stdout   # seq bound by input_ids
    feeds = gx.default_feeds(gx.load(path), {"input_ids": (2, 6)})
    assert feeds["input_ids"].max() == 3 and (feeds["attention_mask"] == 1).all()
    expected = np.arange(12, dtype=np.float32).reshape(4, 3)[np.arange(12).reshape(2, 6) % 4]
    np.testing.assert_array_equal(np.load(out)["y"], expected)


def test_a_run_on_made_inputs_that_fails_on_shapes_says_which_dims_to_set(tmp_path):
    x = helper.make_tensor_value_info("image", TensorProto.FLOAT, ["N", 3, "H", "W"])
    w = numpy_helper.from_array(np.ones((4, 3, 3, 3), np.float32), "w")
    path = _model(tmp_path, [helper.make_node("Conv", ["image", "w"], ["y"])], [x], [w])
    p = cli("run", path)
    assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr
    assert "the inputs were made with these dims at 1 (image: N, H, W); set them with --shape image=?,3,?,?" \
        in p.stderr
    p = cli("run", path, "--shape", "image=1,3,5,5")
    assert p.returncode == 0 and "input image: float32[1,3,5,5] (made; N=1, H=5, W=5)" in p.stdout
