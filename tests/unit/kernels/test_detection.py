"""NonMaxSuppression (and RoiAlign) against onnx's reference, the ONNX node tests and the
plain pair-by-pair loop the fast path replaces."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from kernel_oracle import node_cases_without_fallback
from onnx import helper
from onnx.reference import ReferenceEvaluator

from graphexec.kernels import cost_ops
from graphexec.kernels.cost import node_cost
from graphexec.kernels.detection import nms_plain, non_max_suppression
from graphexec.kernels.registry import OpContext

RNG = np.random.default_rng(35)


def _reference(boxes, scores, m, iou, score, center):
    node = helper.make_node("NonMaxSuppression", ["b", "s", "m", "i", "t"], ["y"], center_point_box=center)
    graph = helper.make_graph([node], "g", [onnx.ValueInfoProto(name=n) for n in "bsmit"],
                              [onnx.ValueInfoProto(name="y")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    return ReferenceEvaluator(model).run(None, dict(b=boxes, s=scores, m=m, i=iou, t=score))[0]


def _boxes(b, n, center, rounded):
    xy = RNG.uniform(0, 100, (b, n, 2)).astype(np.float32)
    wh = RNG.uniform(-2, 30, (b, n, 2)).astype(np.float32)   # some flipped or empty boxes
    boxes = np.concatenate([xy, wh] if center else [xy, xy + wh], axis=-1)
    return np.round(boxes) if rounded else boxes


@pytest.mark.parametrize("trial", range(12))
def test_nms_equals_the_reference(trial):
    """Random boxes, ties in scores and rounded (touching) boxes, both box formats, past a chunk."""
    b, c, n = 1 + trial % 2, 1 + trial % 3, [1, 7, 150, 300][trial % 4]
    center = trial % 2
    boxes = _boxes(b, n, center, rounded=trial % 3 == 0)
    scores = RNG.random((b, c, n)).astype(np.float32)
    if trial % 4 == 1:
        scores = np.round(scores * 4) / 4
    m = np.array([[5, 40, 1000][trial % 3]], dtype=np.int64)
    iou = np.array([[0.0, 0.3, 0.5, 0.7][trial % 4]], dtype=np.float32)
    score = np.array([[0.0, 0.2][trial % 2]], dtype=np.float32)
    ours = non_max_suppression(OpContext("NonMaxSuppression", {"center_point_box": center}), boxes, scores, m, iou,
                               score)
    ref = _reference(boxes, scores, m, iou, score, center)
    assert ours.dtype == np.int64 and ours.shape == ref.shape
    np.testing.assert_array_equal(ours, ref)
    for bi in range(b):   # the plain loop selects the same boxes
        for ci in range(c):
            rows = ours[(ours[:, 0] == bi) & (ours[:, 1] == ci), 2]
            np.testing.assert_array_equal(rows, nms_plain(boxes[bi], scores[bi, ci], int(m[0]), iou[0], score[0],
                                                          center))


def test_nms_without_max_boxes_selects_nothing():
    boxes, scores = _boxes(1, 4, 0, False), RNG.random((1, 1, 4)).astype(np.float32)
    assert non_max_suppression(OpContext("NonMaxSuppression"), boxes, scores).shape == (0, 3)


def test_nms_node_tests_run_the_own_kernel():
    cases = node_cases_without_fallback(r"^test_nonmaxsuppression_")
    assert len(cases) >= 10
    assert all(ok and not fallback for _, ok, fallback in cases), cases


def test_nms_cost_counts_box_pairs():
    cost = node_cost("NonMaxSuppression", [(1, 1000, 4), (1, 2, 1000), (1,), (1,), (1,)], 24_000, [None], 0, {},
                     False)
    assert cost.unit == "vector" and cost.block_dim == 2
    assert cost.flops == pytest.approx(2 * (1000 * 10 + cost_ops.IOU_OPS * 1000 * 999 / 2))


def _roi_model(attrs, opset=16):
    node = helper.make_node("RoiAlign", ["x", "rois", "idx"], ["y"], **attrs)
    graph = helper.make_graph([node], "g", [onnx.ValueInfoProto(name=n) for n in ("x", "rois", "idx")],
                              [onnx.ValueInfoProto(name="y")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


@pytest.mark.parametrize("trial", range(8))
def test_roi_align_equals_the_reference_and_onnxruntime(trial):
    """Fixed and adaptive sampling grids, both coordinate modes, avg and max, ROIs reaching
    past the map and tiny ones (forced to 1x1 without half_pixel), two images."""
    import onnxruntime as ort
    from onnx import TensorProto

    from graphexec.kernels.detection import roi_align

    x = RNG.standard_normal((2, 5, 12, 10)).astype(np.float32)
    xy = RNG.uniform(-4, 44, (9, 2)).astype(np.float32)
    rois = np.concatenate([xy, xy + RNG.uniform(0.2, 30, (9, 2)).astype(np.float32)], axis=1)
    idx = RNG.integers(0, 2, 9).astype(np.int64)
    attrs = {"output_height": [2, 3, 7][trial % 3], "output_width": [3, 2, 7][trial % 3],
             "sampling_ratio": [0, 2, 1, 0][trial % 4], "spatial_scale": [0.25, 0.5][trial % 2],
             "coordinate_transformation_mode": ["half_pixel", "output_half_pixel"][trial // 4 % 2],
             "mode": ["avg", "max"][trial // 2 % 2]}
    ours = roi_align(OpContext("RoiAlign", attrs, 16), x, rois, idx)
    model = _roi_model(attrs)
    ref = ReferenceEvaluator(model).run(None, {"x": x, "rois": rois, "idx": idx})[0]
    np.testing.assert_allclose(ours, ref, rtol=1e-6, atol=1e-6)
    if attrs["mode"] == "avg":   # onnxruntime's max mode takes the max of the four weighted taps too, but not bitwise
        typed = [helper.make_tensor_value_info(n, t, None) for n, t in
                 (("x", TensorProto.FLOAT), ("rois", TensorProto.FLOAT), ("idx", TensorProto.INT64))]
        model.graph.ClearField("input")
        model.graph.input.extend(typed)
        model.graph.ClearField("output")
        model.graph.output.extend([helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
        got = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
            None, {"x": x, "rois": rois, "idx": idx})[0]
        np.testing.assert_allclose(ours, got, rtol=1e-5, atol=1e-5)


def test_roi_align_node_tests_run_the_own_kernel():
    cases = node_cases_without_fallback(r"^test_roialign_")
    assert len(cases) == 3 and all(ok and not fallback for _, ok, fallback in cases), cases


@pytest.mark.parametrize("layout", ["spread", "clustered", "class_offsets"])
def test_nms_sweep_selects_what_the_dense_test_and_onnxruntime_select(monkeypatch, layout):
    """Thousands of boxes (the x-sorted sweep's case): spread out, clustered (most pairs meet:
    the dense test), and moved apart per class as torchvision's batched NMS does."""
    import onnxruntime as ort
    from onnx import TensorProto

    from graphexec.kernels import detection

    n = 3000
    boxes = _boxes(1, n, 0, rounded=False)
    boxes *= np.float32({"spread": 8.0, "clustered": 1.0, "class_offsets": 1.0}[layout])
    if layout == "class_offsets":
        boxes += (RNG.integers(0, 40, n) * 1000.0).astype(np.float32)[None, :, None]
    scores = RNG.random((1, 1, n)).astype(np.float32)
    m, iou, score = np.array([800], np.int64), np.array([0.5], np.float32), np.array([0.1], np.float32)
    ctx = OpContext("NonMaxSuppression")
    swept = non_max_suppression(ctx, boxes, scores, m, iou, score)
    monkeypatch.setattr(detection, "SWEEP_FROM", 10 ** 9)
    np.testing.assert_array_equal(swept, non_max_suppression(ctx, boxes, scores, m, iou, score))
    node = helper.make_node("NonMaxSuppression", ["b", "s", "m", "i", "t"], ["y"])
    types = [("b", TensorProto.FLOAT), ("s", TensorProto.FLOAT), ("m", TensorProto.INT64), ("i", TensorProto.FLOAT),
             ("t", TensorProto.FLOAT)]
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(k, t, None) for k, t in types],
                              [helper.make_tensor_value_info("y", TensorProto.INT64, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    got = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, dict(b=boxes, s=scores, m=m, i=iou, t=score))[0]
    np.testing.assert_array_equal(swept, got)
