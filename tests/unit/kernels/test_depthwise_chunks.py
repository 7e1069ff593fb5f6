"""Depthwise Conv's columns in chunks of channels (``conv2d.DW_CHUNK_BYTES``) against the
columns made in one go, bit for bit: every channel's product is the same BLAS call on the
same numbers. Strides 1 and 2 (the padded-width path and the strided one), dilations,
pads, and edge values (inf, NaN, +-0, subnormals) in the image and the filter."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graphexec.kernels import conv2d

_EDGES = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1.2e-38, 3e38, -3e38], np.float32)


def _edgy(shape, rng):
    v = (rng.standard_normal(shape) * 10.0 ** rng.integers(-3, 4, shape)).astype(np.float32)
    flat = v.reshape(-1)
    k = rng.integers(0, max(1, flat.size // 10) + 1)
    flat[rng.integers(0, flat.size, k)] = rng.choice(_EDGES, k)
    return v


def _conv(x, w, geo, whole: int, chunk: int):
    y = np.full((w.shape[0], *geo.out), 7, np.float32)
    with pytest.MonkeyPatch.context() as mp, np.errstate(all="ignore"):
        mp.setattr(conv2d, "DW_WHOLE_BYTES", whole)
        mp.setattr(conv2d, "DW_CHUNK_BYTES", chunk)
        conv2d._depthwise(x, w, geo, y)
    return y


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 24), st.integers(1, 12), st.integers(1, 12), st.sampled_from([1, 3, 5]),
       st.sampled_from([(1, 1), (2, 1), (1, 2), (2, 2)]), st.sampled_from([1, 2]), st.integers(0, 2),
       st.integers(0, 2**31))
def test_channel_chunks_give_the_whole_columns_bits(c, h, w, k, strides, dil, pad, seed):
    rng = np.random.default_rng(seed)
    span = (k - 1) * dil + 1
    if h + 2 * pad < span or w + 2 * pad < span:
        return
    out = [(n + 2 * pad - span) // s + 1 for n, s in zip((h, w), strides)]
    geo = conv2d.Geometry([k, k], list(strides), [dil, dil], [pad, pad], out)
    x, f = _edgy((c, h, w), rng), _edgy((c, 1, k, k), rng)
    whole = _conv(x, f, geo, 1 << 40, 1 << 40)
    per = k * k * out[0] * (out[1] if strides != (1, 1) else geo.padded_shape()[1]) * 4
    chunked = _conv(x, f, geo, 0, int(rng.integers(1, 4)) * per)   # 1 to 3 channels a chunk
    assert chunked.tobytes() == whole.tobytes()


def test_big_columns_go_in_chunks():
    """PP-OCR's 240x12x40 5x5: 12.7 MB of columns, so chunks of a few channels."""
    assert conv2d._channel_step(240, 25 * 12 * 44 * 4) == (2 << 20) // (25 * 12 * 44 * 4) == 39
    assert conv2d._channel_step(116, 9 * 28 * 30 * 4) == 116   # ShuffleNet's 28x28: in one go
