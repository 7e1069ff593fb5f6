"""Signal ops: DFT, STFT and the window generators, on numpy.fft.

onnx.reference computes DFT with numpy.fft too, but STFT builds its frames one by one in
Python (slice, pad, concatenate per frame); here the frames are one strided view. Both
follow the reference's conventions: the last axis holds (real, imaginary) or one real
value; a one-sided result keeps the first n/2 + 1 frequencies; results are cast back to
the input's dtype.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
from onnx import helper

from graphexec.kernels import cost_ops
from graphexec.kernels.registry import OpContext, Unsupported, register


def _complex(x: np.ndarray) -> np.ndarray:
    """The signal of a [..., 1] (real) or [..., 2] (real, imaginary) array, last axis dropped."""
    if x.shape[-1] == 1:
        return x[..., 0]
    if x.shape[-1] != 2:
        raise Unsupported(f"DFT: last axis of size {x.shape[-1]}, not 1 or 2")
    return x[..., 0] + 1j * x[..., 1]


def _pairs(z: np.ndarray) -> np.ndarray:
    return np.stack([np.real(z), np.imag(z)], axis=-1)


def dft(x: np.ndarray, length: int | None, axis: int, inverse: bool, onesided: bool) -> np.ndarray:
    if x.dtype.kind != "f" or x.ndim < 2:
        raise Unsupported(f"DFT: input {x.dtype} of rank {x.ndim}")
    axis = axis % x.ndim
    if axis == x.ndim - 1:
        raise Unsupported("DFT: the transform axis is the (real, imaginary) axis")
    if length is None:
        length = 2 * (x.shape[axis] - 1) if inverse and onesided else x.shape[axis]
    z = _complex(x)
    if inverse:
        res = np.fft.irfft(z, n=length, axis=axis)[..., None] if onesided else _pairs(np.fft.ifft(z, n=length,
                                                                                                  axis=axis))
    else:
        res = _pairs(np.fft.fft(z, n=length, axis=axis))
        if onesided:
            res = np.take(res, np.arange(res.shape[axis] // 2 + 1), axis=axis)
    return res.astype(x.dtype)


def _scalar(v: Any) -> int | None:
    return None if v is None or np.size(v) == 0 else int(np.asarray(v).reshape(-1)[0])


@register("DFT", since=17, until=19, cost=cost_ops.fft)
def dft_17(ctx: OpContext, x: np.ndarray, length: np.ndarray | None = None) -> np.ndarray:
    return dft(x, _scalar(length), int(ctx.attr("axis", 1)), bool(ctx.attr("inverse", 0)),
               bool(ctx.attr("onesided", 0)))


@register("DFT", since=20, cost=cost_ops.fft)
def dft_20(ctx: OpContext, x: np.ndarray, length: np.ndarray | None = None,
           axis: np.ndarray | None = None) -> np.ndarray:
    got = _scalar(axis)
    return dft(x, _scalar(length), -2 if got is None else got, bool(ctx.attr("inverse", 0)),
               bool(ctx.attr("onesided", 0)))


@register("STFT", since=17, cost=cost_ops.fft)
def stft(ctx: OpContext, x: np.ndarray, step: np.ndarray, window: np.ndarray | None = None,
         length: np.ndarray | None = None) -> np.ndarray:
    """[batch, frames, bins, 2]: the DFT of each windowed frame of x [batch, samples, 1 or 2],
    or of a real x [batch, samples]: torch.onnx's TorchScript exporter writes torch.stft's
    signal so, onnxruntime takes it (the reference fails on it)."""
    if x.dtype.kind == "f" and x.ndim == 2:
        x = x[..., None]
    if x.dtype.kind != "f" or x.ndim != 3:
        raise Unsupported(f"STFT: input {x.dtype} of rank {x.ndim}")
    hop = _scalar(step)
    size = _scalar(length)
    if size is None:
        size = x.shape[-2] if window is None else window.shape[0]
    if window is None:
        window = np.ones(size, dtype=x.dtype)
    if hop is None or hop < 1 or window.shape[0] != size or size > x.shape[1]:
        raise Unsupported("STFT: step, window and frame length disagree")
    frames = sliding_window_view(x, size, axis=1)[:, ::hop]   # [batch, frames, 1|2, size]
    frames = np.moveaxis(frames, -1, -2) * window.reshape(size, 1)   # [batch, frames, size, 1|2]
    z = np.fft.fft(_complex(frames), n=size, axis=-1)
    if ctx.attr("onesided", 1):
        z = z[..., :size // 2 + 1]
    return _pairs(z).astype(x.dtype)


def _window(ctx: OpContext, size: np.ndarray) -> tuple[np.ndarray, int, Any]:
    n = _scalar(size)
    if n is None or n < 0:
        raise Unsupported(f"{ctx.op}: size {size!r}")
    dtype = helper.tensor_dtype_to_np_dtype(int(ctx.attr("output_datatype", 1)))
    return np.arange(n, dtype=dtype), (n if ctx.attr("periodic", 1) else n - 1), dtype


@register("HannWindow", since=17)
def hann_window(ctx: OpContext, size: np.ndarray) -> np.ndarray:
    ni, n1, dtype = _window(ctx, size)
    return (np.sin(ni * np.pi / n1) ** 2).astype(dtype)


@register("HammingWindow", since=17)
def hamming_window(ctx: OpContext, size: np.ndarray) -> np.ndarray:
    ni, n1, dtype = _window(ctx, size)
    alpha = 25.0 / 46.0
    return (alpha - np.cos(ni * np.pi * 2 / n1) * (1 - alpha)).astype(dtype)


@register("BlackmanWindow", since=17)
def blackman_window(ctx: OpContext, size: np.ndarray) -> np.ndarray:
    _, n1, dtype = _window(ctx, size)
    ni = np.arange(_scalar(size) or 0)   # integers, in float64 arithmetic, as the reference has it
    y = np.cos((ni * (np.pi * 2)) / n1) * (-0.5)
    y += np.cos((ni * (np.pi * 4)) / n1) * 0.08
    y += 0.42
    return y.astype(dtype)
