"""torchvision's Faster R-CNN (random weights, exported by torch.onnx) through graphexec: no op
through the reference fallback (NonMaxSuppression in If branches, RoiAlign, TopK, NonZero),
detections equal to onnxruntime's. Skipped where torch and torchvision are not installed (they
are tools of the benchmark, not dependencies)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
import pytest

pytestmark = pytest.mark.slow
pytest.importorskip("torchvision")
ort = pytest.importorskip("onnxruntime")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import detection_corpus  # noqa: E402

import graphexec as gx  # noqa: E402
from graphexec.cli.fallbacks import compiled_runners  # noqa: E402
from graphexec.kernels.dispatch import fallback_uses  # noqa: E402


def test_faster_rcnn_runs_own_kernels_and_equals_onnxruntime():
    path = next(p for p in detection_corpus.build() if p.stem.startswith("fasterrcnn"))
    image = np.load(path.with_suffix(".npz"))["image"]
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    expected = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"]).run(None, {"image": image})
    session = gx.Session(gx.load(onnx.load(str(path))))
    got = list(session.run({"image": image}).outputs.values())
    assert fallback_uses(compiled_runners(session.compiled)) == []
    boxes, labels, scores = got
    np.testing.assert_array_equal(labels, expected[1])
    np.testing.assert_allclose(boxes, expected[0], rtol=1e-4, atol=0.05)
    np.testing.assert_allclose(scores, expected[2], rtol=1e-3, atol=1e-4)
