"""STFT, DFT and MelWeightMatrix on the shapes speech models use (models/export_audio.py:
torch.stft and torch.fft.rfft exported by torch.onnx's TorchScript and dynamo exporters, 16 kHz
audio, Whisper's 400-sample Hann window and hop 160), compared with onnxruntime. The
TorchScript exporter hands STFT a [batch, samples] signal, on which the reference fallback
failed ("need at least one array to concatenate")."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as h

import graphexec as gx

ort = pytest.importorskip("onnxruntime")
MODELS = Path(__file__).resolve().parents[2] / "models"


def _audio(n: int) -> np.ndarray:
    return np.random.default_rng(n).uniform(-0.5, 0.5, (1, n)).astype(np.float32)


def _both(path: Path, x: np.ndarray, streams: int = 1) -> tuple[gx.Result, np.ndarray]:
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"audio": x})[0]
    return gx.Session(gx.load(path), streams=streams).run({"audio": x}), want


@pytest.mark.parametrize("samples", [16000, 48000, 400])   # 1 s, 3 s, one frame
def test_torchscript_stft_on_a_2d_signal_equals_onnxruntime(samples):
    result, want = _both(MODELS / "audio_stft_ts.onnx", _audio(samples))
    np.testing.assert_allclose(result.outputs["out"], want, rtol=1e-4, atol=1e-4)
    assert result.outputs["out"].shape == (1, 16, 1 + (samples - 400) // 160)
    stft = [e for e in result.trace["traceEvents"] if e.get("cat") == "kernel" and e["args"]["op"] == "STFT"]
    assert len(stft) == 1   # an own kernel, not the reference on the AI CPU


@pytest.mark.parametrize("streams", [1, 4])
def test_whisper_log_mel_front_end_equals_onnxruntime(streams):
    result, want = _both(MODELS / "audio_whisper_dynamo.onnx", _audio(16000), streams)
    assert result.outputs["out"].shape == want.shape == (1, 16, 100)
    np.testing.assert_allclose(result.outputs["out"], want, rtol=1e-5, atol=1e-5)


def test_rfft_of_16000_samples_is_closer_to_float64_than_onnxruntime():
    """onnxruntime's float32 DFT of a length that is no power of two drifts by 1e-3 of the
    largest value; graphexec transforms in float64 as the reference does and stays within 1e-7."""
    x = _audio(16000)
    result, want = _both(MODELS / "audio_rfft_dynamo.onnx", x)
    z = np.fft.rfft(x.astype(np.float64), axis=-1)
    exact = np.abs(z.real) + np.abs(z.imag)
    ours = result.outputs["out"]
    assert np.abs(ours - exact).max() <= 1e-6 * exact.max()
    np.testing.assert_allclose(ours, want, atol=2e-3 * exact.max())


@pytest.mark.parametrize("mels,dft,rate,low,high", [(80, 400, 16000, 0.0, 8000.0), (128, 512, 22050, 20.0, 11025.0)])
def test_mel_weight_matrix_from_fed_values_equals_onnxruntime(mels, dft, rate, low, high):
    """Fed at run time (not folded): Whisper's 80 x 201 and a 22.05 kHz 128-mel bank."""
    names = [("mels", T.INT64), ("dft", T.INT64), ("rate", T.INT64), ("low", T.FLOAT), ("high", T.FLOAT)]
    g = h.make_graph([h.make_node("MelWeightMatrix", [n for n, _ in names], ["w"])], "mel",
                     [h.make_tensor_value_info(n, t, []) for n, t in names],
                     [h.make_tensor_value_info("w", T.FLOAT, None)])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    feeds = {"mels": np.array(mels), "dft": np.array(dft), "rate": np.array(rate), "low": np.array(low, np.float32),
             "high": np.array(high, np.float32)}
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    got = gx.Session(gx.load(m)).run(feeds).outputs["w"]
    assert got.shape == (dft // 2 + 1, mels)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)

