"""The dense conv's column matrix made by one strided copy (conv2d._all_taps) holds exactly the
bytes of the copy per kernel tap it replaced, so every GEMM, and the conv's output, is the same."""

from __future__ import annotations

import numpy as np
import pytest

from graphexec.kernels import conv2d, scratch
from graphexec.kernels.conv import conv
from graphexec.kernels.conv2d import Geometry
from graphexec.kernels.registry import OpContext

RNG = np.random.default_rng(29)


def _tap_by_tap(xp: np.ndarray, geo: Geometry, r0: int, r1: int, pairs: bool) -> np.ndarray:
    """The former way: one copy per tap (i, j) from a sliced view (the pair copy on stride 2)."""
    (kh, kw), (sh, sw), (dh, dw), wo = geo.kernel, geo.strides, geo.dil, geo.out[1]
    cols = np.empty((xp.shape[0], kh, kw, r1 - r0, wo), xp.dtype)
    for i in range(kh):
        for j in range(kw):
            top, left = r0 * sh + i * dh, j * dw
            tap = xp[:, top:top + (r1 - r0 - 1) * sh + 1:sh, left:left + (wo - 1) * sw + 1:sw]
            if pairs:
                scratch.copy_every_other(cols[:, i, j], tap)
            else:
                cols[:, i, j] = tap
    return cols


def _special(x: np.ndarray) -> np.ndarray:
    """Some NaN (with payloads), infinities, signed zeros and subnormals among the values."""
    flat = x.reshape(-1)
    n = flat.size
    picks = RNG.choice(n, size=min(n, 12), replace=False)
    nans = np.array([0x7FC00001, 0xFFC01234, 0x7F800001], np.uint32).view(np.float32)
    values = np.concatenate([nans, np.array([np.inf, -np.inf, -0.0, 0.0, 1e-45, -1e-40], np.float32),
                             np.zeros(12, np.float32)])[:picks.size]
    with np.errstate(invalid="ignore"):   # NaN payloads widened to float64
        values = values.astype(x.dtype)
    flat[picks] = values
    return x


GEOMETRIES = [   # (C, H, W), kernel, strides, dilations, pads (top, left)
    ((3, 17, 19), (3, 3), (2, 2), (1, 1), (0, 0)),
    ((3, 16, 16), (3, 3), (2, 2), (1, 1), (1, 1)),
    ((5, 13, 11), (3, 3), (1, 1), (1, 1), (1, 1)),
    ((4, 9, 12), (2, 3), (1, 2), (1, 1), (0, 1)),
    ((2, 15, 14), (3, 3), (2, 1), (2, 2), (2, 1)),
    ((6, 12, 13), (3, 2), (3, 3), (1, 2), (1, 0)),
    ((2, 8, 8), (1, 3), (1, 2), (1, 1), (0, 1)),
    ((7, 7, 7), (3, 3), (1, 1), (1, 1), (1, 1)),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,kernel,strides,dil,begin", GEOMETRIES)
def test_one_copy_gives_the_tap_by_tap_columns(shape, kernel, strides, dil, begin, dtype):
    x = _special(RNG.standard_normal(shape).astype(dtype))
    (h, w), sw = shape[1:], strides[1]
    out = [(n + 2 * b - ((k - 1) * d + 1)) // s + 1 for n, b, k, d, s in zip((h, w), begin, kernel, dil, strides)]
    geo = Geometry(list(kernel), list(strides), list(dil), list(begin), out)
    hp, wp = geo.padded_shape()
    xp = scratch.padded("t.onecopy", x, begin, (hp, wp))
    pairs = sw == 2
    ho = out[0]
    for r0, r1 in [(0, ho), (0, max(1, ho // 2)), (ho // 2, ho), (ho - 1, ho)]:
        want = _tap_by_tap(xp, geo, r0, r1, pairs)
        got = np.empty_like(want)
        conv2d._all_taps(xp, geo, r0, r1, got, pairs)
        assert got.tobytes() == want.tobytes(), (r0, r1)


def _old_im2col_gemm(x: np.ndarray, w2: np.ndarray, geo: Geometry) -> np.ndarray:
    """_im2col_gemm as it was (per-tap columns, the same chunks and GEMMs), for one image."""
    c, (kh, kw), (ho, wo) = x.shape[0], geo.kernel, geo.out
    hp, wp = geo.padded_shape()
    xp = scratch.padded("t.old", x, tuple(geo.begin), (hp, wp))
    k = c * kh * kw
    rows = max(1, min(ho, conv2d.CHUNK_BYTES // max(1, k * wo * x.itemsize)))
    y2 = np.empty((w2.shape[0], ho * wo), x.dtype)
    for r0 in range(0, ho, rows):
        r1 = min(ho, r0 + rows)
        cols = _tap_by_tap(xp, geo, r0, r1, geo.strides[1] == 2)
        with np.errstate(all="ignore"):   # the NaN and infinities among the inputs
            np.matmul(w2, cols.reshape(k, -1), out=y2[:, r0 * wo:r1 * wo])
    return y2.reshape(w2.shape[0], ho, wo)


@pytest.mark.parametrize("chunk", [conv2d.CHUNK_BYTES, 2048])   # one chunk, and many
@pytest.mark.parametrize("shape,kernel,strides,dil,begin", GEOMETRIES)
def test_conv_outputs_are_the_former_bytes(monkeypatch, shape, kernel, strides, dil, begin, chunk):
    monkeypatch.setattr(conv2d, "CHUNK_BYTES", chunk)
    x = _special(RNG.standard_normal((1, *shape)).astype(np.float32))
    m = 5
    w = RNG.standard_normal((m, shape[0], *kernel)).astype(np.float32)
    b = RNG.standard_normal(m).astype(np.float32)
    pads = [begin[0], begin[1], begin[0], begin[1]]
    ctx = OpContext("Conv", {"kernel_shape": list(kernel), "strides": list(strides), "dilations": list(dil),
                             "pads": pads}, 13, 1, "c", (False, True, True))
    got = conv(ctx, x, w, b)
    geo = conv2d.Geometry(list(kernel), list(strides), list(dil), list(begin), list(got.shape[2:]))
    if geo.kernel == [1, 1] or (geo.kernel == [3, 3] and geo.strides == [1, 1]
                                and conv2d.winograd.worth_it(shape[0], m, *geo.out)):
        pytest.skip("not the im2col path")
    with np.errstate(all="ignore"):
        want = _old_im2col_gemm(x[0], w.reshape(m, -1), geo) + b.reshape(m, 1, 1)
    assert got[0].tobytes() == want.astype(np.float32).tobytes()
