"""Fast paths of 2-D Conv (float32/float64): each image is one or a few BLAS calls.

- 1x1 stride 1, unpadded: the input already is the (C, H·W) matrix; one GEMM.
- 3x3 stride 1 with enough channels and tiles: Winograd F(4x4, 3x3) (``winograd.py``).
- any other dense conv: im2col into a reused scratch in chunks of output rows (the chunk
  stays in cache), one GEMM per chunk straight into the output's rows.
- depthwise (one filter per channel): the compiled loop of ``depthwise.py`` in float32 when
  it is built, else per-channel columns and one batched matmul.
- grouped: the dense path per group.

With ``exact`` (the integer convolutions' float32 operands) Winograd is left out: its
transforms round, while every other path only sums the products, which is exact for
integers whose partial sums stay below 2**24.

The output goes to ``out`` (the output's device bytes) when the executor gives it.
Filters prepared for a node (Winograd's transform) are cached on its ``OpContext``
when the filter is a constant of the graph.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.lib.stride_tricks import as_strided

from graphexec import _switch
from graphexec.kernels import channels, depthwise, parallel, scratch, winograd
from graphexec.kernels.registry import OpContext, fits

_FAST = (np.dtype(np.float32), np.dtype(np.float64))
CHUNK_BYTES = 4 << 20     # column-matrix scratch per chunk of output rows
GEMM_COLS = 2048          # output pixels per block of a 1x1 convolution's GEMM


class Geometry:
    """Where the windows of one 2-D conv sit: kernel, strides, dilations, begin pads, output size."""

    __slots__ = ("kernel", "strides", "dil", "begin", "out")

    def __init__(self, kernel: list[int], strides: list[int], dil: list[int], begin: list[int],
                 out: list[int]) -> None:
        self.kernel, self.strides, self.dil, self.begin, self.out = kernel, strides, dil, begin, out

    def padded_shape(self) -> tuple[int, int]:
        """Rows and columns of the padded input that the windows reach."""
        return tuple((o - 1) * s + (k - 1) * d + 1 for o, s, k, d in
                     zip(self.out, self.strides, self.kernel, self.dil))  # type: ignore[return-value]


def fast_conv(ctx: OpContext, x: np.ndarray, w: np.ndarray, b: np.ndarray | None, groups: int,
              geo: Geometry, out: np.ndarray | None, exact: bool = False) -> np.ndarray | None:
    """The convolution, or None when no fast path serves this case; ``exact``: no Winograd."""
    if x.ndim != 4 or x.dtype not in _FAST or w.dtype != x.dtype or (b is not None and b.dtype != x.dtype):
        return None
    n, c = x.shape[:2]
    m = w.shape[0]
    shape = (n, m, *geo.out)
    y = out if fits(out, shape, x.dtype) and out.flags.c_contiguous else np.empty(shape, x.dtype)
    for i in range(n):
        if groups == 1:
            _dense(ctx, x[i], w, geo, y[i], exact)
        elif w.shape[1] == 1 and m == c == groups:
            if not (depthwise.available() and _cached(ctx, "finite", w, _finite)
                    and depthwise.run(x[i], w, geo.kernel, geo.strides, geo.dil, geo.begin, y[i])):
                _depthwise(x[i], w, geo, y[i])
        else:
            _grouped(x[i], w, groups, geo, y[i])
    if b is not None:
        channels.apply(np.add, y, b.reshape(1, m, 1, 1), y)
    return y


def _dense(ctx: OpContext, x: np.ndarray, w: np.ndarray, geo: Geometry, y: np.ndarray, exact: bool) -> None:
    """One image (C, H, W) -> (M, Ho, Wo), groups == 1."""
    m, c = w.shape[:2]
    y2 = y.reshape(m, -1)
    if geo.kernel == [1, 1] and geo.strides == [1, 1] and geo.begin == [0, 0] \
            and list(x.shape[1:]) == geo.out:
        _gemm(w.reshape(m, c), x.reshape(c, -1), y2)
        return
    if not exact and geo.kernel == [3, 3] and geo.strides == [1, 1] and geo.dil == [1, 1] \
            and _switch.FAST and winograd.worth_it(c, m, *geo.out):
        winograd.conv(x, _cached(ctx, "winograd", w, winograd.weights), tuple(geo.begin), y)
        return
    _im2col_gemm(x, w.reshape(m, -1), geo, y2)


def _cached(ctx: OpContext, key: str, w: np.ndarray, make: Any) -> np.ndarray:
    """``make(w)``, kept on the node's context when ``w`` is a graph constant (it cannot
    change between runs); recomputed otherwise."""
    if len(ctx.const_inputs) < 2 or not ctx.const_inputs[1]:
        return make(w)
    hit = ctx.cache.get(key)
    if hit is None or hit[0].shape != w.shape:
        hit = ctx.cache[key] = (w, make(w))
    return hit[1]


def _finite(w: np.ndarray) -> bool:
    return bool(np.isfinite(w).all())


def _im2col_gemm(x: np.ndarray, w2: np.ndarray, geo: Geometry, y2: np.ndarray) -> None:
    """Column matrix by kernel tap, a chunk of output rows at a time, each chunk one GEMM
    (chunks are independent: with threads they run side by side). A strided conv with
    more than 9 taps first splits the padded input into its stride phases, so each tap
    copies unit-stride rows (ResNet's 7x7 stride-2 stem: 1.24x faster; 3x3 gains nothing)."""
    c = x.shape[0]
    (kh, kw), (sh, sw), (dh, dw) = geo.kernel, geo.strides, geo.dil
    ho, wo = geo.out
    hp, wp = geo.padded_shape()
    if geo.begin == [0, 0] and hp <= x.shape[1] and wp <= x.shape[2]:   # no padding: the taps read x itself
        xp = x[:, :hp, :wp]
    else:
        xp = scratch.padded("conv.x", x, tuple(geo.begin), (hp, wp))
    phases = _phases(xp, sh, sw, {i * dh % sh for i in range(kh)}, {j * dw % sw for j in range(kw)}) \
        if kh * kw > 9 and sh * sw > 1 else None
    k = c * kh * kw
    rows = max(1, min(ho, CHUNK_BYTES // max(1, k * wo * x.itemsize)))
    pairs = phases is None and sw == 2   # taps that step over every other column

    def chunk(r0: int) -> None:
        r1 = min(ho, r0 + rows)
        cols = scratch.buffer("conv.cols", (c, kh, kw, r1 - r0, wo), x.dtype)
        if phases is None:
            _all_taps(xp, geo, r0, r1, cols, pairs)
        else:
            for i in range(kh):
                for j in range(kw):
                    cols[:, i, j] = _tap(xp, phases, geo, i, j, r0, r1)
        np.matmul(w2, cols.reshape(k, -1), out=y2[:, r0 * wo:r1 * wo])

    parallel.run_all(chunk, range(0, ho, rows), 2.0 * w2.shape[0] * k * ho * wo)


def _all_taps(xp: np.ndarray, geo: Geometry, r0: int, r1: int, cols: np.ndarray, pairs: bool) -> None:
    """cols (C, kh, kw, rows, Wo) = the input under every tap for output rows r0..r1, as one
    copy from a strided view of ``xp`` (the same elements as a copy per tap, one numpy call:
    the pair copy of a stride-2 conv gains most, SqueezeNet's 3x224x224 stem 158 -> 79 us,
    ResNet's 128x56x56 410 -> 319 us; stride 1 5-8 %)."""
    (kh, kw), (sh, sw), (dh, dw), wo = geo.kernel, geo.strides, geo.dil, geo.out[1]
    sc, sr, se = xp.strides
    src = as_strided(xp[:, r0 * sh:], (xp.shape[0], kh, kw, r1 - r0, wo), (sc, dh * sr, dw * se, sh * sr, sw * se),
                     writeable=False)
    if pairs:
        scratch.copy_every_other(cols, src, within=xp)
    else:
        np.copyto(cols, src)


def _tap(xp: np.ndarray, phases: dict, geo: Geometry, i: int, j: int, r0: int, r1: int) -> np.ndarray:
    """The input under tap (i, j) for output rows r0..r1: a unit-stride slice of one of the
    phases of the padded input."""
    (sh, sw), (dh, dw), wo = geo.strides, geo.dil, geo.out[1]
    top, left = r0 + i * dh // sh, j * dw // sw
    return phases[i * dh % sh, j * dw % sw][:, top:top + r1 - r0, left:left + wo]


def _phases(xp: np.ndarray, sh: int, sw: int, rows: set[int], cols: set[int]) -> dict[tuple[int, int], np.ndarray]:
    """Phase (a, b) of ``xp`` (C, H, W) holds its rows a::sh and columns b::sw, for the
    phases the taps use."""
    out = {}
    for a in sorted(rows):
        for b in sorted(cols):
            src = xp[:, a::sh, b::sw]
            out[a, b] = ph = scratch.buffer(f"conv.ph{a}.{b}", src.shape, xp.dtype)
            scratch.copy_every_other(ph, src)
    return out


def _gemm(w2: np.ndarray, x2: np.ndarray, y2: np.ndarray) -> None:
    """y2 = w2 @ x2, in blocks of output columns (pixels). The cut depends on the shapes
    only, so threads do not change a bit; rows (channels) are never cut, which keeps the
    rounding of every channel what one GEMM gives."""
    n = x2.shape[1]
    if n < 2 * GEMM_COLS:
        np.matmul(w2, x2, out=y2)
        return
    parallel.run_all(lambda n0: np.matmul(w2, x2[:, n0:n0 + GEMM_COLS], out=y2[:, n0:n0 + GEMM_COLS]),
                     range(0, n, GEMM_COLS), 2.0 * w2.shape[0] * w2.shape[1] * n)


def _depthwise(x: np.ndarray, w: np.ndarray, geo: Geometry, y: np.ndarray) -> None:
    """One filter per channel: per-channel columns, then a (1 x K) @ (K x P) product per
    channel, all in one batched matmul (measured faster than a multiply-add per tap).
    With stride 1 the columns are taken on the padded width: each tap is then one
    contiguous run of every channel's flattened padded image, and the extra columns of
    the result are dropped at the end (1.5-2x faster on ShuffleNet's 14x14 and 28x28).
    Every tap's columns are copied by one np.copyto from a strided view of the padded
    image (one numpy call, not one per tap: 490 -> 367 us on a 240x12x40 5x5 input).
    Columns past ``DW_WHOLE_BYTES`` are made and multiplied ``DW_CHUNK_BYTES`` of channels
    at a time, so the matmul reads them from cache (PP-OCR's 240x12x40 and 480x6x40 5x5:
    12.7 MB of columns, 650 -> 450 and 970 -> 520 us); each channel's product is the same
    BLAS call on the same numbers, so the bits are too."""
    c = x.shape[0]
    (kh, kw), (sh, sw), (dh, dw) = geo.kernel, geo.strides, geo.dil
    ho, wo = geo.out
    hp, wp = geo.padded_shape()
    taps = w.reshape(c, 1, kh * kw)
    if sh == sw == 1:
        xf = scratch.padded("conv.x", x, tuple(geo.begin), (hp + 1, wp)).reshape(c, -1)
        n = ho * wp
        sc, se = xf.strides
        wide = scratch.buffer("conv.wide", (c, 1, n), x.dtype)
        step = _channel_step(c, kh * kw * n * x.itemsize)
        cols = scratch.buffer("conv.cols", (step, kh, kw, n), x.dtype)
        for c0 in range(0, c, step):
            m = min(step, c - c0)
            np.copyto(cols[:m], as_strided(xf[c0:], (m, kh, kw, n), (sc, dh * wp * se, dw * se, se), writeable=False))
            np.matmul(taps[c0:c0 + m], cols[:m].reshape(m, kh * kw, n), out=wide[c0:c0 + m])
            y[c0:c0 + m] = wide[c0:c0 + m].reshape(m, ho, wp)[:, :, :wo]   # while the chunk is in cache
        return
    xp = scratch.padded("conv.x", x, tuple(geo.begin), (hp, wp))
    sc, sr, se = xp.strides
    step = _channel_step(c, kh * kw * ho * wo * x.itemsize)
    cols = scratch.buffer("conv.cols", (step, kh, kw, ho, wo), x.dtype)
    y3 = y.reshape(c, 1, ho * wo)
    for c0 in range(0, c, step):
        m = min(step, c - c0)
        scratch.copy_every_other(cols[:m], as_strided(xp[c0:], (m, kh, kw, ho, wo),
                                                      (sc, dh * sr, dw * se, sh * sr, sw * se), writeable=False),
                                 within=xp)
        np.matmul(taps[c0:c0 + m], cols[:m].reshape(m, kh * kw, ho * wo), out=y3[c0:c0 + m])


DW_WHOLE_BYTES = 8 << 20   # depthwise columns up to this size are made in one go
DW_CHUNK_BYTES = 2 << 20   # past it, channels are taken this many bytes of columns at a time


def _channel_step(c: int, per_channel: int) -> int:
    """Channels per chunk of a depthwise conv's columns (``per_channel`` bytes each)."""
    if c * per_channel <= DW_WHOLE_BYTES:
        return c
    return max(1, DW_CHUNK_BYTES // per_channel)


def _grouped(x: np.ndarray, w: np.ndarray, groups: int, geo: Geometry, y: np.ndarray) -> None:
    """The dense path once per group, on the group's channels; a 1x1 convolution is one
    batched matmul over the groups."""
    mg, cg = w.shape[0] // groups, w.shape[1]
    if geo.kernel == [1, 1] and geo.strides == [1, 1] and geo.begin == [0, 0] and list(x.shape[1:]) == geo.out:
        np.matmul(w.reshape(groups, mg, cg), x.reshape(groups, cg, -1), out=y.reshape(groups, mg, -1))
        return
    for g in range(groups):
        xg, wg, yg = x[g * cg:(g + 1) * cg], w[g * mg:(g + 1) * mg], y[g * mg:(g + 1) * mg]
        _im2col_gemm(xg, wg.reshape(mg, -1), geo, yg.reshape(mg, -1))
