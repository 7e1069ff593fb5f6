"""DFT, STFT and the window ops against onnx's reference and the ONNX node tests."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from kernel_oracle import node_cases_without_fallback
from onnx import helper
from onnx.reference import ReferenceEvaluator

from graphexec.kernels.registry import OpContext
from graphexec.kernels.signal import stft

RNG = np.random.default_rng(35)


def test_signal_node_tests_run_own_kernels():
    cases = node_cases_without_fallback(r"^test_(dft|stft|hannwindow|hammingwindow|blackmanwindow)")
    assert len(cases) >= 20
    assert all(ok and not fallback for _, ok, fallback in cases), cases


@pytest.mark.parametrize("onesided,complex_in,windowed", [(1, False, True), (0, True, False), (1, True, True)])
def test_stft_frames_equal_the_reference(onesided, complex_in, windowed):
    x = RNG.standard_normal((2, 1000, 2 if complex_in else 1)).astype(np.float32)
    step, size = np.array(37, dtype=np.int64), 64
    window = np.hanning(size).astype(np.float32) if windowed else None
    length = None if windowed else np.array(size, dtype=np.int64)
    ours = stft(OpContext("STFT", {"onesided": onesided}, 17), x, step, window, length)
    names = ["x", "s", "w" if windowed else "", "" if windowed else "l"]
    node = helper.make_node("STFT", names, ["y"], onesided=onesided)
    graph = helper.make_graph([node], "g", [onnx.ValueInfoProto(name=n) for n in names if n],
                              [onnx.ValueInfoProto(name="y")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    feeds = {"x": x, "s": step, **({"w": window} if windowed else {"l": length})}
    ref = ReferenceEvaluator(model).run(None, feeds)[0]
    assert ours.shape == ref.shape and ours.dtype == ref.dtype
    np.testing.assert_allclose(ours, ref, rtol=1e-5, atol=1e-4)
