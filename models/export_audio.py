"""Make the audio front ends in models/: torch.stft and torch.fft.rfft exported by torch.onnx,
on the shapes a speech model uses (16 kHz audio, Whisper's 400-sample Hann window, hop 160).

- ``audio_stft_ts.onnx``: TorchScript exporter (opset 17): ``torch.stft(center=False,
  return_complex=False)``, power, a mel projection, log10; the audio length is dynamic. The
  exporter hands STFT the signal as [batch, samples] (no trailing 1), which onnxruntime takes.
- ``audio_whisper_dynamo.onnx``: the dynamo exporter (opset 18): Whisper's
  ``log_mel_spectrogram`` (``center=True``: reflect padding; complex STFT, the last frame
  dropped, |.|^2, mel, log10, clamped to max - 8, scaled) on 1 s of audio.
- ``audio_rfft_dynamo.onnx``: the dynamo exporter: ``torch.fft.rfft`` of 16000 samples (a DFT
  of a length that is no power of two), |re| + |im| summed.

The mel projection is random (seed 0), 16 mels of 201 bins (Whisper has 80; the STFT's shapes
do not depend on it, the files stay small). torch is needed only to run this script, never by
graphexec or its tests (the files are committed beside it): ``pip install torch==2.13.0
onnxscript``, then ``python models/export_audio.py``.
"""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).parent
N_FFT, HOP, MELS, RATE = 400, 160, 16, 16000


def _modules():   # type: ignore[no-untyped-def]
    import torch

    torch.manual_seed(0)
    mel = torch.rand(MELS, N_FFT // 2 + 1)

    class Frames(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("win", torch.hann_window(N_FFT))
            self.register_buffer("mel", mel)

        def forward(self, audio):   # type: ignore[no-untyped-def]
            st = torch.stft(audio, N_FFT, HOP, window=self.win, return_complex=False, center=False)
            return torch.clamp(self.mel @ st.pow(2).sum(-1), min=1e-10).log10()

    class Whisper(Frames):
        def forward(self, audio):   # type: ignore[no-untyped-def]
            st = torch.stft(audio, N_FFT, HOP, window=self.win, return_complex=True)
            logspec = torch.clamp(self.mel @ (st[..., :-1].abs() ** 2), min=1e-10).log10()
            return (torch.maximum(logspec, logspec.max() - 8.0) + 4.0) / 4.0

    class RFFT(torch.nn.Module):
        def forward(self, audio):   # type: ignore[no-untyped-def]
            return torch.view_as_real(torch.fft.rfft(audio, dim=-1)).abs().sum(-1)

    return Frames().eval(), Whisper().eval(), RFFT().eval()


def main() -> None:
    import torch

    frames, whisper, rfft = _modules()
    x = torch.randn(1, RATE)
    names = dict(input_names=["audio"], output_names=["out"])
    torch.onnx.export(frames, (x,), str(HERE / "audio_stft_ts.onnx"), dynamo=False, opset_version=17,
                      dynamic_axes={"audio": {1: "samples"}}, **names)
    torch.onnx.export(whisper, (x,), str(HERE / "audio_whisper_dynamo.onnx"), dynamo=True, opset_version=18,
                      external_data=False, **names)
    torch.onnx.export(rfft, (x,), str(HERE / "audio_rfft_dynamo.onnx"), dynamo=True, opset_version=18,
                      external_data=False, **names)
    print(f"wrote the audio front ends into {HERE}")


if __name__ == "__main__":
    main()
