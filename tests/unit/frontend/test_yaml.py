"""YAML graphs: loading, every problem at its line and column with the exact message, the schema file."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

import graphexec as gx
from graphexec.errors import GraphValidationError
from graphexec.frontend.yaml import check_text, load_yaml, loads_yaml, validate_yaml

ROOT = Path(__file__).resolve().parents[3]

GOOD = """\
name: g
opset: 17
inputs: [x]
outputs: [y]
tensors:
  x: {dtype: float32, shape: [2, 3]}
  w: {dtype: float32, shape: [3, 4], value: [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12]]}
  b: {dtype: float32, shape: [4], value: 0.5}
nodes:
  - {name: mm, op: MatMul, inputs: [x, w], outputs: [h], stream_label: main, priority: 2}
  - {name: add, op: Add, inputs: [h, b], outputs: [a]}
  - {name: act, op: LeakyRelu, inputs: [a], outputs: [y], attributes: {alpha: 1}}
options: {device: ascend910, streams: 2}
"""


def problems(text: str, base: Path = Path(".")) -> list[str]:
    return [str(p) for p in check_text(text, "g.yaml", base)[1]]


def test_good_graph_loads_types_and_runs():
    g = loads_yaml(GOOD, "g.yaml")
    assert [n.name for n in g.nodes] == ["mm", "add", "act"]
    assert str(g.values["y"].type) == "float32[2x4]"
    assert g.nodes[0].meta == {"stream_label": "main", "priority": 2}
    assert g.nodes[2].attrs == {"alpha": 1.0}  # an int where ONNX wants a float is the float
    assert g.meta["options"] == {"device": "ascend910", "streams": 2}
    x = np.arange(6, dtype=np.float32).reshape(2, 3) - 2
    y = gx.Session(g).run({"x": x}).outputs["y"]
    w = np.arange(1, 13, dtype=np.float32).reshape(3, 4)
    a = x @ w + 0.5
    np.testing.assert_array_equal(y, np.where(a > 0, a, a * 1.0))


def test_load_dispatches_on_suffix_and_reports_first_problem(tmp_path):
    p = tmp_path / "g.yml"
    p.write_text(GOOD)
    assert [n.op for n in gx.load(p).nodes] == ["MatMul", "Add", "LeakyRelu"]
    p.write_text(GOOD.replace("[x, w]", "[x, ww]").replace("[h, b]", "[h, bb]"))
    with pytest.raises(GraphValidationError) as e:
        gx.load(p)
    assert str(e.value) == (f"{p}:10:40: node mm (MatMul) reads 'ww', which no node, input or tensor defines; "
                            "did you mean 'w'? (and 1 more; `graphexec validate` lists them all)")
    assert len(e.value.problems) == 2 and isinstance(e.value, gx.ModelLoadError)


def test_missing_and_directory(tmp_path):
    with pytest.raises(gx.ModelLoadError, match=r"nope\.yaml: no such file$"):
        load_yaml(tmp_path / "nope.yaml")
    (tmp_path / "d.yaml").mkdir()
    with pytest.raises(gx.ModelLoadError, match=r"d\.yaml: is a directory, not a YAML graph$"):
        validate_yaml(tmp_path / "d.yaml")


@pytest.mark.parametrize("text,expected", [
    ("name: [1\n", ["g.yaml:2:1: invalid YAML: expected ',' or ']', but got '<stream end>'"]),
    ("", ["g.yaml:1:1: the file is empty; a graph needs at least name, outputs and nodes"]),
    ("- 1\n", ["g.yaml:1:1: a graph file is a mapping with name, inputs, outputs, tensors and nodes"]),
    (GOOD.replace("opset: 17", "opset: 17\nname: h"), ["g.yaml:3:1: duplicate key 'name' (first at line 1)"]),
    (GOOD.replace("op: Add,", "opp: Add,"), ["g.yaml:11:5: nodes[1].op: Field required",
                                             "g.yaml:11:17: nodes[1].opp: unknown field; did you mean 'op'?"]),
    (GOOD.replace("priority: 2", "priority: 9"), ["g.yaml:10:78: nodes[0].priority: Input should be less than "
                                                  "or equal to 7"]),
    (GOOD.replace("streams: 2", "streams: many"), ["g.yaml:13:30: options.streams: must be an int >= 1 or 'auto'"]),
    (GOOD.replace("shape: [2, 3]", "shape: [2, -3]"), ["g.yaml:6:34: tensors.x.shape[1]: must be a size from 0 "
                                                       "to 2**63-1, a symbolic name, or null for unknown"]),
    (GOOD.replace("value: 0.5", "value: 0.5, file: b.npy"), ["g.yaml:8:3: tensors.b: give at most one of value, "
                                                             "file, random (got value, file)"]),
])
def test_document_problems(text, expected):
    assert problems(text) == expected


def test_a_contrib_op_with_its_domain_is_fine():
    assert problems(GOOD.replace("op: MatMul", "op: FusedMatMul, domain: com.microsoft", 1)) == []


@pytest.mark.parametrize("old,new,expected", [
    ("op: MatMul", "op: MatMull", "g.yaml:10:16: node 'mm': unknown op 'MatMull'; closest known: MatMul, "
                                  "QLinearMatMul, Mul"),
    # a built-in contrib op is named with its domain, as in ONNX (only the user's kernels resolve bare)
    ("op: MatMul", "op: FusedMatMul", "g.yaml:10:16: node 'mm': unknown op 'FusedMatMul'; closest known: MatMul"),
    ("op: MatMul", "op: Xyzzy", "g.yaml:10:16: node 'mm': unknown op 'Xyzzy'; no ONNX op or registered kernel "
                                "has a similar name"),
    ("op: Add", "op: Gelu", "g.yaml:11:17: node add (Gelu): op 'Gelu' is not in opset 17 (it exists from opset 20)"),
    ("{alpha: 1}", "{alpah: 1}", "g.yaml:12:72: node act (LeakyRelu): unknown attribute 'alpah'; LeakyRelu has: alpha"),
    ("outputs: [y]\ntensors", "outputs: [yy]\ntensors", "g.yaml:4:11: graph output 'yy' is not made by any node, "
                                                         "input or tensor; did you mean 'y'?"),
    ("outputs: [a]}", "outputs: [h]}", "g.yaml:11:52: node add (Add) writes 'h', which is already written by "
                                       "node mm (MatMul)"),
    ("inputs: [x]", "inputs: [x, z]", "g.yaml:3:13: input 'z' is not declared under tensors; give its dtype and "
                                      "shape there"),
    ("value: 0.5", "value: [1, 2]", "g.yaml:8:35: tensor 'b': value has 2 elements, shape [4] needs 4"),
    ("value: 0.5", "file: b.npy", "g.yaml:8:35: tensor 'b': file 'b.npy' not found (looked in .)"),
    ("device: ascend910", "device: tpu", "g.yaml:13:11: unknown device 'tpu'; known: ascend310p, ascend910, "
                                         "ascend910b, nvidia-a100, nvidia-h100, nvidia-v100 (or give a .yaml/.yml profile path)"),
    ("shape: [3, 4]", "shape: [4, 3]", None),
])
def test_graph_problems(old, new, expected):
    text = GOOD.replace(old, new, 1).replace("inputs: [a]", "inputs: [h]" if new == "outputs: [h]}" else "inputs: [a]")
    if expected is None:  # the value list reshaped to [4, 3] makes MatMul's inputs disagree
        expected = ("g.yaml:10:5: node mm (MatMul): Incompatible dimensions for matrix multiplication "
                    "(inputs float32[2x3], float32[4x3])")
    assert problems(text) == [expected]


def test_every_problem_at_once():
    text = GOOD.replace("op: MatMul", "op: MatMull").replace("[h, b]", "[h, bb]").replace("device: ascend910",
                                                                                         "device: tpu")
    got = problems(text)
    assert [p.split(": ", 1)[0] for p in got] == ["g.yaml:10:16", "g.yaml:11:38", "g.yaml:13:11"]


def test_cycle_names_its_nodes():
    text = GOOD.replace("[x, w]", "[x, y]").replace("  w: {dtype: float32, shape: [3, 4], value: "
                                                    "[[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12]]}\n", "")
    assert problems(text) == ["g.yaml:9:5: the graph has a cycle: mm (MatMul) -> add (Add) -> act (LeakyRelu) "
                              "-> mm (MatMul)"]


def test_declared_type_must_agree_with_inference():
    text = GOOD.replace("  b: {", "  y: {dtype: int64, shape: [2, 4]}\n  b: {")
    assert problems(text) == ["g.yaml:8:3: tensor 'y' is declared int64[2x4] but node act (LeakyRelu) makes "
                              "float32[2x4]"]


def test_files_random_and_exponent_floats(tmp_path):
    np.save(tmp_path / "w.npy", np.full((3, 4), 2, np.float32))
    np.savez(tmp_path / "all.npz", bias=np.arange(4, dtype=np.float32))
    text = (GOOD.replace("value: [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12]]", "file: w.npy")
            .replace("value: 0.5", "file: all.npz, key: bias").replace("{alpha: 1}", "{alpha: 1e-2}"))
    g = loads_yaml(text, "g.yaml", tmp_path)
    assert g.values["w"].const.tolist() == [[2.0] * 4] * 3 and g.values["b"].const.tolist() == [0, 1, 2, 3]
    assert g.nodes[2].attrs["alpha"] == pytest.approx(0.01)
    assert problems(text.replace("key: bias", "key: nope"), tmp_path) == [
        "g.yaml:8:35: tensor 'b': file 'all.npz': has no array 'nope'; it has bias"]
    rnd = GOOD.replace("value: 0.5", "random: {seed: 3, std: 2.0}")
    b = loads_yaml(rnd).values["b"].const
    np.testing.assert_array_equal(b, (np.random.default_rng(3).standard_normal(4) * 2.0).astype(np.float32))


def test_custom_op_resolves_to_its_domain():
    @gx.kernel("YamlTwice", shape="same")
    def twice(x):
        return x * 2

    text = GOOD.replace("op: LeakyRelu", "op: YamlTwice").replace(", attributes: {alpha: 1}", "")
    g = loads_yaml(text)
    assert g.nodes[2].domain == "graphexec.custom" and g.opsets["graphexec.custom"] == 1
    assert str(g.values["y"].type) == "float32[2x4]"
    y = gx.Session(g).run({"x": np.ones((2, 3), np.float32)}).outputs["y"]
    np.testing.assert_array_equal(y, (np.ones((2, 3), np.float32) @ g.values["w"].const + 0.5) * 2)


def test_schema_file_is_current():
    sys.path.insert(0, str(ROOT / "schemas"))
    import generate

    path = ROOT / "schemas" / "graph.schema.json"
    assert path.read_text() == generate.render("graph.schema.json"), "run python schemas/generate.py"


def test_examples_match_the_json_schema():
    import jsonschema
    import yaml

    schema = json.loads((ROOT / "schemas" / "graph.schema.json").read_text())
    for path in sorted((ROOT / "models").glob("*.yaml")):
        jsonschema.validate(yaml.safe_load(path.read_text()), schema)
