"""Sequences, maps and optionals as graph inputs and outputs: Python lists, dicts and None
through the API, the CLI (``--save`` writes them in cli/values.py's documented form and
``--input NAME=FILE.npz`` reads it back) and ``convert`` (their types kept through YAML and
back to ONNX), compared with onnxruntime."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

import graphexec as gx
from graphexec.errors import FeedError
from graphexec.ir.onnx_proto import type_text

ort = pytest.importorskip("onnxruntime")
ROOT = Path(__file__).resolve().parents[2]
ZIPMAP = ROOT / "models" / "skl_zipmap_str.onnx"   # written by skl2onnx (models/export_zipmap.py)


def _cli(*args: object) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "cli.py"), *map(str, args)], capture_output=True, text=True,
                          cwd=ROOT, timeout=300)


def _ort(model: onnx.ModelProto | Path, feeds: dict) -> list:
    src = str(model) if isinstance(model, Path) else model.SerializeToString()
    return ort.InferenceSession(src, providers=["CPUExecutionProvider"]).run(None, feeds)


def _sequences() -> onnx.ModelProto:
    """s (a sequence in) -> y = its tensors concatenated, parts = y split back into a sequence,
    maybe = an optional holding y's sum."""
    nodes = [h.make_node("ConcatFromSequence", ["s"], ["y"], axis=0),
             h.make_node("SplitToSequence", ["y"], ["parts"], axis=0),
             h.make_node("ReduceSum", ["y"], ["total"], keepdims=0),
             h.make_node("Optional", ["total"], ["maybe"])]
    g = h.make_graph(nodes, "seq", [h.make_tensor_sequence_value_info("s", T.FLOAT, None)],
                     [h.make_tensor_value_info("y", T.FLOAT, None),
                      h.make_tensor_sequence_value_info("parts", T.FLOAT, None),
                      h.make_value_info("maybe", h.make_optional_type_proto(h.make_tensor_type_proto(T.FLOAT, [])))])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 18)])


SEQ = [np.arange(6, dtype=np.float32).reshape(2, 3), np.ones((1, 3), np.float32)]


@pytest.mark.parametrize("streams", [1, 4])
def test_sequence_and_optional_values_through_the_api(streams):
    m = _sequences()
    out = gx.Session(gx.load(m), streams=streams).run({"s": SEQ}).outputs
    y, parts, maybe = _ort(m, {"s": SEQ})
    np.testing.assert_array_equal(out["y"], y)
    assert isinstance(out["parts"], list) and len(out["parts"]) == len(parts) == 3
    for a, b in zip(out["parts"], parts):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(out["maybe"], maybe)


def test_a_sequence_input_takes_a_list_only():
    with pytest.raises(FeedError, match=r"input 's' is a seq\(tensor\(float\)\): give a list, not a ndarray"):
        gx.Session(gx.load(_sequences())).run({"s": SEQ[0]})


def test_cli_saves_a_sequence_of_maps_in_the_documented_form(tmp_path):
    p = _cli("run", ZIPMAP, "--save", tmp_path / "o.npz")
    assert p.returncode == 0, p.stderr
    saved = np.load(tmp_path / "o.npz", allow_pickle=False)   # nothing pickled
    assert int(saved["output_probability#len"]) == 1
    assert saved["output_probability#0#keys"].tolist() == ["cat", "dog", "eel"]
    probs = saved["output_probability#0#values"]
    assert probs.shape == (3,) and abs(float(probs.sum()) - 1) < 1e-6
    assert saved["output_label"].dtype.kind == "U"


def test_cli_sequence_round_trip_through_save_and_input(tmp_path):
    model = tmp_path / "seq.onnx"
    onnx.save(_sequences(), str(model))
    from graphexec.cli.values import flatten

    np.savez(tmp_path / "in.npz", **dict(flatten("s", SEQ)))
    p = _cli("run", model, "--input", f"s={tmp_path / 'in.npz'}", "--save", tmp_path / "o.npz")
    assert p.returncode == 0, p.stderr
    saved = np.load(tmp_path / "o.npz", allow_pickle=False)
    y, parts, maybe = _ort(model, {"s": SEQ})
    np.testing.assert_array_equal(saved["y"], y)
    assert int(saved["parts#len"]) == 3
    np.testing.assert_array_equal(saved["parts#2"], parts[2])
    np.testing.assert_array_equal(saved["maybe"], maybe)
    bad = _cli("run", model, "--input", f"s={tmp_path / 'o.npz'}")
    assert bad.returncode == 2 and "has no value 's'" in bad.stderr and bad.stderr.count("\n") == 1


def test_convert_keeps_container_types(tmp_path):
    for source in (ZIPMAP, tmp_path / "seq.onnx"):
        if not source.exists():
            onnx.save(_sequences(), str(source))
        yaml_file, back = tmp_path / f"{source.stem}.yaml", tmp_path / f"{source.stem}_back.onnx"
        assert _cli("convert", source, yaml_file).returncode == 0
        assert "kind: sequence" in yaml_file.read_text()
        p = _cli("convert", yaml_file, back)
        assert p.returncode == 0, p.stderr
        types = {v.name: v.type for v in [*onnx.load(str(back)).graph.input, *onnx.load(str(back)).graph.output]}
        want = onnx.load(str(source))
        for v in [*want.graph.input, *want.graph.output]:
            if v.type.WhichOneof("value") != "tensor_type":   # element types kept (not shapes inside)
                assert type_text(types[v.name]) == type_text(v.type) is not None
    x = np.random.default_rng(0).standard_normal((4, 6)).astype(np.float32)
    ours = gx.Session(gx.load(tmp_path / "skl_zipmap_str_back.onnx")).run({"X": x}).outputs["output_probability"]
    theirs = _ort(tmp_path / "skl_zipmap_str_back.onnx", {"X": x})[1]
    assert [list(m) for m in ours] == [list(m) for m in theirs]
