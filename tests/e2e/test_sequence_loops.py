"""A Loop whose carried values are sequences runs on the device like any other body
(passes/control_flow.py): a greedy decoder written by torch.jit.script and exported by
torch.onnx (models/scripted_greedy_loop.onnx: SequenceEmpty, SequenceInsert in the body,
ConcatFromSequence) equals onnxruntime, runs its body's tasks once per step, and its simulated
time is linear in its trip count, where it was one opaque task of the same 9 us for 6 or 24
steps. A sequence keeps its tensors even when the memory plan reuses their bytes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

import graphexec as gx

ort = pytest.importorskip("onnxruntime")
GREEDY = Path(__file__).resolve().parents[2] / "models" / "scripted_greedy_loop.onnx"
STATE = np.random.default_rng(0).standard_normal((2, 8)).astype(np.float32)


def _run(steps: int, streams: int = 1) -> gx.Result:
    return gx.Session(gx.load(GREEDY), streams=streams).run({"h": STATE, "steps": np.array(steps, np.int64)})


@pytest.mark.parametrize("streams", [1, 4])
@pytest.mark.parametrize("steps", [6, 24])
def test_scripted_greedy_loop_equals_onnxruntime(steps, streams):
    feeds = {"h": STATE, "steps": np.array(steps, np.int64)}
    want = ort.InferenceSession(str(GREEDY), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    result = _run(steps, streams)
    np.testing.assert_array_equal(result.outputs["tokens"], want)
    inserts = [e for e in result.trace["traceEvents"] if e.get("cat") in ("kernel", "aicpu")
               and e["args"].get("op") == "SequenceInsert"]
    assert len(inserts) == steps   # the body's tasks, once per step


def test_sequence_loop_time_is_linear_in_its_trip_count():
    t = {n: _run(n).stats.makespan_us for n in (6, 12, 24)}
    assert t[6] < t[12] < t[24]
    assert t[24] - t[12] == pytest.approx(2 * (t[12] - t[6]), rel=1e-9)
    assert t[24] > 3 * t[6]


@pytest.mark.parametrize("streams", [1, 4])
def test_a_sequence_keeps_its_tensors_when_their_bytes_are_reused(streams):
    """a goes into the sequence; later tensors may take a's bytes once it is dead."""
    nodes = [h.make_node("SequenceEmpty", [], ["s0"], dtype=T.FLOAT),
             h.make_node("Add", ["x", "one"], ["a"]), h.make_node("SequenceInsert", ["s0", "a"], ["s1"]),
             h.make_node("Relu", ["x"], ["b"]), h.make_node("Neg", ["b"], ["b2"]),
             h.make_node("SequenceInsert", ["s1", "b2"], ["s2"]), h.make_node("Exp", ["b2"], ["c"]),
             h.make_node("Sin", ["c"], ["c2"]), h.make_node("SequenceInsert", ["s2", "c2"], ["s3"]),
             h.make_node("ConcatFromSequence", ["s3"], ["y"], axis=0)]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [64, 64])],
                     [h.make_tensor_value_info("y", T.FLOAT, None)],
                     [onnx.numpy_helper.from_array(np.array(1, np.float32), "one")])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    x = np.random.default_rng(1).standard_normal((64, 64)).astype(np.float32)
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    got = gx.Session(gx.load(m), streams=streams).run({"x": x}).outputs["y"]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
