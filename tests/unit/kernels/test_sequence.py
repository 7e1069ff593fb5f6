"""The sequence ops' own kernels (kernels/sequence.py) against onnxruntime: insert at a
negative position, at, erase, length, every form of SplitToSequence, ConcatFromSequence with
and without a new axis; a fed list is not changed by a run."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

import graphexec as gx
from graphexec.kernels import lookup

ort = pytest.importorskip("onnxruntime")
X = np.arange(24, dtype=np.float32).reshape(4, 6)


def _model(nodes: list[onnx.NodeProto], outputs: list[onnx.ValueInfoProto]) -> onnx.ModelProto:
    inits = [onnx.numpy_helper.from_array(np.array(v, np.int64), n) for n, v in
             (("neg", -1), ("zero", 0), ("two", 2), ("sizes", [1, 2, 3]), ("scalar", 4))]
    g = h.make_graph(nodes, "seq", [h.make_tensor_value_info("x", T.FLOAT, [4, 6]),
                                    h.make_tensor_sequence_value_info("fed", T.FLOAT, None)], outputs, inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)])


def _t(name: str) -> onnx.ValueInfoProto:
    return h.make_tensor_value_info(name, T.FLOAT, None)


def _s(name: str) -> onnx.ValueInfoProto:
    return h.make_tensor_sequence_value_info(name, T.FLOAT, None)


CASES = {
    "insert_at_erase": ([h.make_node("SequenceInsert", ["fed", "x", "neg"], ["s1"]),
                         h.make_node("SequenceInsert", ["s1", "x"], ["s2"]),
                         h.make_node("SequenceErase", ["s2", "zero"], ["s3"]),
                         h.make_node("SequenceAt", ["s3", "neg"], ["last"]),
                         h.make_node("SequenceLength", ["s3"], ["n"])],
                        [_s("s3"), _t("last"), h.make_tensor_value_info("n", T.INT64, [])]),
    "split_each_squeezed": ([h.make_node("SplitToSequence", ["x"], ["parts"], axis=1, keepdims=0),
                             h.make_node("ConcatFromSequence", ["parts"], ["y"], axis=0, new_axis=1)],
                            [_s("parts"), _t("y")]),
    "split_scalar_and_sizes": ([h.make_node("SplitToSequence", ["x", "scalar"], ["a"], axis=1),
                                h.make_node("SplitToSequence", ["x", "sizes"], ["b"], axis=1),
                                h.make_node("ConcatFromSequence", ["b"], ["y"], axis=-1)],
                               [_s("a"), _s("b"), _t("y")]),
    "construct_empty": ([h.make_node("SequenceConstruct", ["x", "x"], ["c"]),
                         h.make_node("SequenceEmpty", [], ["e"], dtype=T.FLOAT),
                         h.make_node("SequenceInsert", ["e", "x", "zero"], ["e1"]),
                         h.make_node("ConcatFromSequence", ["c"], ["y"], axis=0)],
                        [_s("c"), _s("e1"), _t("y")]),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("streams", [1, 4])
def test_sequence_ops_equal_onnxruntime(case, streams):
    m = _model(*CASES[case])
    fed = [np.ones((4, 6), np.float32), np.zeros((4, 6), np.float32)]
    before = [a.copy() for a in fed]
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"x": X, "fed": fed})
    got = gx.Session(gx.load(m), streams=streams).run({"x": X, "fed": fed}).outputs
    for (name, ours), theirs in zip(got.items(), want):
        if isinstance(theirs, list):
            assert isinstance(ours, list) and len(ours) == len(theirs), name
            for a, b in zip(ours, theirs):
                np.testing.assert_array_equal(a, b)
        else:
            np.testing.assert_array_equal(ours, theirs)
    assert len(fed) == 2 and all(np.array_equal(a, b) for a, b in zip(fed, before))


def test_every_sequence_op_has_an_own_kernel():
    for op in ("SequenceEmpty", "SequenceConstruct", "SequenceInsert", "SequenceAt", "SequenceErase",
               "SequenceLength", "SplitToSequence", "ConcatFromSequence", "Optional", "OptionalHasElement",
               "OptionalGetElement"):
        assert lookup(op, "", 18) is not None, op
