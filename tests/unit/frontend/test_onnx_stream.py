"""Initializers read straight into arrays (``frontend/onnx_stream.py``): the same constants,
dtypes, shapes and read-only flags as numpy_helper.to_array of the whole parse, for every
element type; anything odd falls back to the whole parse and its errors."""

from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np
import onnx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

import graphexec as gx
from graphexec.errors import ModelLoadError
from graphexec.frontend import onnx as frontend
from graphexec.frontend.onnx_stream import raw_bytes, split_weights

rng = np.random.default_rng(0)
WEIGHTS = {
    "f32": rng.standard_normal((64, 33)).astype(np.float32),
    "f16": rng.standard_normal((5, 7)).astype(np.float16),
    "f64": rng.standard_normal(9),
    "i8": rng.integers(-128, 127, (3, 4, 5)).astype(np.int8),
    "u16": rng.integers(0, 60000, 11).astype(np.uint16),
    "i64": rng.integers(-2**40, 2**40, (2, 3)),
    "u64": rng.integers(0, 2**62, 4).astype(np.uint64),
    "b": rng.integers(0, 2, 13).astype(bool),
    "c64": (rng.standard_normal(3) + 1j * rng.standard_normal(3)).astype(np.complex64),
    "bf16": rng.standard_normal(6).astype(ml_dtypes.bfloat16),
    "i4": rng.integers(-8, 7, 7).astype(ml_dtypes.int4),
    "empty": np.zeros((0, 3), np.float32),
    "scalar": np.array(2.5, np.float32),
}


def _model(extra: list[TensorProto] = ()) -> onnx.ModelProto:
    inits = [numpy_helper.from_array(a, n) for n, a in WEIGHTS.items()]
    inits.append(helper.make_tensor("typed", TensorProto.FLOAT, [3], [1.0, 2.0, 3.0]))   # no raw_data
    inits.append(helper.make_tensor("s", TensorProto.STRING, [2], [b"ab", b"c"]))
    inits += extra
    node = helper.make_node("Identity", ["x"], ["y"])
    graph = helper.make_graph([node], "w", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])


def _save(model: onnx.ModelProto, tmp_path: Path) -> Path:
    path = tmp_path / "w.onnx"
    path.write_bytes(model.SerializeToString())
    return path


@pytest.fixture
def split_always(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(frontend, "STREAM_MIN_BYTES", 1)


def _constants(graph: gx.Graph) -> dict[str, tuple]:
    return {n: (v.const.dtype, v.const.shape, v.const.tolist() if v.const.dtype == object else v.const.tobytes(),
                v.const.flags.writeable) for n, v in graph.values.items() if isinstance(v.const, np.ndarray)}


def test_every_element_type_loads_as_to_array_gives_it(tmp_path: Path, split_always: None) -> None:
    path = _save(_model(), tmp_path)
    with path.open("rb") as f:
        stripped, raws = split_weights(f, path.stat().st_size)
    assert len(raws) == len(WEIGHTS) and len(stripped) < 2000   # every raw_data came out
    want = _constants(frontend.from_onnx(onnx.load(str(path)), str(path)))
    got = _constants(gx.load(str(path)))
    assert got == want
    assert got["f32"][3] is False   # read-only, as a view of the parsed bytes is


def test_raw_bytes_counts_the_initializers_raw_data() -> None:
    model = _model()
    with __import__("io").BytesIO(model.SerializeToString()) as f:
        n = raw_bytes(f, model.ByteSize())
    assert n == sum(a.nbytes if a.dtype != ml_dtypes.int4 else 4 for a in WEIGHTS.values())


def test_a_file_of_weights_in_constant_nodes_is_parsed_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Weights in Constant nodes are not initializers' raw_data: splitting would only cost."""
    w = rng.standard_normal((256, 256)).astype(np.float32)
    nodes = [helper.make_node("Constant", [], ["w"], value=numpy_helper.from_array(w, "w")),
             helper.make_node("MatMul", ["x", "w"], ["y"])]
    graph = helper.make_graph(nodes, "c", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 256])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 256])])
    path = _save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), tmp_path)
    monkeypatch.setattr(frontend, "STREAM_MIN_BYTES", 1)
    monkeypatch.setattr(frontend, "split_weights", lambda f, n: pytest.fail("split a file of Constant weights"))
    assert np.array_equal(gx.load(str(path)).values["w"].const, w)


def test_a_raw_data_of_the_wrong_length_fails_as_the_whole_parse_does(tmp_path: Path) -> None:
    bad = TensorProto(name="w", dims=[2], data_type=TensorProto.FLOAT, raw_data=b"\0" * 7)
    big = numpy_helper.from_array(np.ones(4096, np.float32), "big")
    path = _save(_model([bad, big]), tmp_path)
    errors = []
    for threshold in (1, 1 << 40):
        frontend.STREAM_MIN_BYTES = threshold
        try:
            with pytest.raises(ModelLoadError) as e:
                gx.load(str(path))
            errors.append(str(e.value))
        finally:
            frontend.STREAM_MIN_BYTES = 32 << 20
    assert errors[0] == errors[1] and "initializer 'w' is malformed" in errors[0]


def test_a_graph_field_twice_is_left_to_protobuf(tmp_path: Path) -> None:
    """protobuf merges a second graph field into the first: the split does not try."""
    extra = helper.make_graph([], "again", [], []).SerializeToString()
    path = tmp_path / "twice.onnx"
    path.write_bytes(_model().SerializeToString() + bytes([7 << 3 | 2, len(extra)]) + extra)
    with path.open("rb") as f:
        assert split_weights(f, path.stat().st_size) is None


@settings(max_examples=40, deadline=None)
@given(cut=st.integers(1, 400), flip=st.integers(0, 255))
def test_a_damaged_file_fails_as_the_whole_parse_does(cut: int, flip: int, tmp_path_factory) -> None:
    """Truncated or with a byte changed: the same error (or the same graph) either way."""
    data = bytearray(_model().SerializeToString())
    data = data[:len(data) - cut]
    data[len(data) // 3] ^= flip
    path = tmp_path_factory.mktemp("bad") / "bad.onnx"
    path.write_bytes(bytes(data))
    outcomes = []
    for threshold in (1, 1 << 40):
        frontend.STREAM_MIN_BYTES = threshold
        try:
            outcomes.append(_constants(gx.load(str(path))))
        except ModelLoadError as e:
            outcomes.append(str(e))
        finally:
            frontend.STREAM_MIN_BYTES = 32 << 20
    assert outcomes[0] == outcomes[1]


def test_a_file_past_the_threshold_takes_the_split(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    big = numpy_helper.from_array(rng.standard_normal((1 << 20) // 4 * 9).astype(np.float32), "big")  # 9 MiB
    path = _save(_model([big]), tmp_path)
    monkeypatch.setattr(frontend, "STREAM_MIN_BYTES", 8 << 20)
    calls = []
    real = frontend.split_weights
    monkeypatch.setattr(frontend, "split_weights", lambda f, n: calls.append(n) or real(f, n))
    got = _constants(gx.load(str(path)))
    assert calls and got == _constants(frontend.from_onnx(onnx.load(str(path)), str(path)))
