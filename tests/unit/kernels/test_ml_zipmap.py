"""ai.onnx.ml.ZipMap has an own kernel (kernels/ml_zipmap.py): skl2onnx's default classifier
export (models/skl_zipmap_*.onnx, written by skl2onnx) gives onnxruntime's sequence of maps,
label to probability, with int64 and string labels, as an AI CPU task."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import graphexec as gx

ort = pytest.importorskip("onnxruntime")
MODELS = Path(__file__).resolve().parents[3] / "models"
X = np.random.default_rng(0).standard_normal((9, 6)).astype(np.float32)


@pytest.mark.parametrize("name", ["skl_zipmap_int.onnx", "skl_zipmap_str.onnx"])
@pytest.mark.parametrize("streams", [1, 4])
def test_skl2onnx_zipmap_equals_onnxruntime(name, streams):
    path = MODELS / name
    labels, maps = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"X": X})
    result = gx.Session(gx.load(path), streams=streams).run({"X": X})
    np.testing.assert_array_equal(result.outputs["output_label"], labels)
    ours = result.outputs["output_probability"]
    assert isinstance(ours, list) and len(ours) == len(maps)
    for got, want in zip(ours, maps):
        assert list(got) == list(want)   # same keys, same order, same Python types
        assert all(type(k) is type(w) for k, w in zip(got, want))
        np.testing.assert_allclose(list(got.values()), list(want.values()), rtol=1e-6, atol=1e-7)


def test_zipmap_is_an_own_aicpu_task():
    result = gx.Session(gx.load(MODELS / "skl_zipmap_int.onnx")).run({"X": X})
    kernels = [e for e in result.trace["traceEvents"] if e.get("cat") == "kernel"]
    zipmap = [e for e in kernels if e["args"]["op"] == "ZipMap"]
    assert len(zipmap) == 1 and zipmap[0]["args"]["unit"] == "aicpu"
    assert gx.kernels.lookup("ZipMap", "ai.onnx.ml") is not None
