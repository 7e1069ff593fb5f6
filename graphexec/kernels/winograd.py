"""Winograd F(4x4, 3x3): 3x3 stride-1 convolution with 4x fewer multiplications.

Lavin & Gray, "Fast Algorithms for Convolutional Neural Networks" (2016). Each 6x6
input tile d becomes V = Bᵀ d B, each filter g becomes U = G g Gᵀ (once per node), the
36 products U·V are summed over input channels as 36 matrix products, and each 4x4
output tile is Aᵀ M A. Both tile transforms run as one GEMM with the Kronecker
product of Bᵀ (or Aᵀ) with itself, so every step is a BLAS call or a strided copy.

In float32 the result differs from direct convolution by about 1e-5 of the output's
largest magnitude (direct: 5e-7), far inside the 1e-3 the ONNX tests allow; the conv
kernel uses it only where the GEMMs are large enough to gain (see ``worth_it``).
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided

from graphexec.kernels import parallel, scratch

_BT = np.array([[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0], [0, 4, -4, -1, 1, 0],
                [0, -2, -1, 2, 1, 0], [0, 2, -1, -2, 1, 0], [0, 4, 0, -5, 0, 1]], np.float64)
_G = np.array([[1 / 4, 0, 0], [-1 / 6, -1 / 6, -1 / 6], [-1 / 6, 1 / 6, -1 / 6],
               [1 / 24, 1 / 12, 1 / 6], [1 / 24, -1 / 12, 1 / 6], [0, 0, 1]], np.float64)
_AT = np.array([[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0], [0, 1, -1, 8, -8, 1]], np.float64)
_KIN = np.kron(_BT, _BT)      # (36, 36): the input transform of a flattened tile
_KOUT = np.kron(_AT, _AT)     # (16, 36): the output transform
CHUNK_BYTES = 2 << 20         # input-transform scratch per chunk of tile rows
MIN_TILES = 128               # tiles per chunk at least (the GEMMs' width)
M_BLOCK = 128                 # output channels per piece when the tiles make one chunk


def worth_it(c: int, m: int, ho: int, wo: int) -> bool:
    """Whether F(4x4, 3x3) beats im2col + GEMM clearly (measured on the light models'
    shapes: with 36 tiles or more it gains 1.5-2.3x; with 16 (14x14) 1.2-1.7x from 96 input
    channels and C x M >= 12288; at 7x7 the transforms cost more than they save). Where
    the gain is small it is not worth a rounding that differs from direct convolution:
    SqueezeNet's 1000 logits of ~9.5e9 tie exactly only if its expand convolutions (32
    and 64 input channels) round as im2col does."""
    tiles = -(-ho // 4) * -(-wo // 4)
    return m >= 32 and ((c >= 64 and tiles >= 36) or (c >= 96 and c * m >= 12288 and tiles >= 16))


def weights(w: np.ndarray) -> np.ndarray:
    """(36, M, C) transformed filters of ``w`` (M, C, 3, 3), computed in float64."""
    m, c = w.shape[:2]
    u = np.einsum("ai,mcij,bj->abmc", _G, w.astype(np.float64), _G)
    return np.ascontiguousarray(u.reshape(36, m, c).astype(w.dtype))


def conv(x: np.ndarray, u: np.ndarray, begin: tuple[int, ...], y: np.ndarray) -> None:
    """y (M, Ho, Wo) = the 3x3 stride-1 convolution of x (C, H, W) padded by ``begin``
    (top, left) and zeros after, with transformed filters ``u``."""
    c, (m, ho, wo) = x.shape[0], y.shape
    th, tw = -(-ho // 4), -(-wo // 4)
    xp = scratch.padded("wino.x", x, begin, (4 * th + 2, 4 * tw + 2))
    kin, kout = _KIN.astype(x.dtype), _KOUT.astype(x.dtype)
    # chunks of tile rows: small enough to stay in cache, wide enough (MIN_TILES) for GEMM
    rows = min(th, max(-(-MIN_TILES // tw), CHUNK_BYTES // (36 * c * tw * x.itemsize)))

    def transformed(r0: int, r1: int) -> np.ndarray:
        """V (36, C, tiles) of tile rows r0..r1."""
        d = scratch.buffer("wino.d", (6, 6, c, r1 - r0, tw), x.dtype)
        sc, sh, sw = xp.strides   # all 36 tile taps as one strided view: one copy, one GIL release
        np.copyto(d, as_strided(xp[:, 4 * r0:], (6, 6, c, r1 - r0, tw), (sh, sw, sc, 4 * sh, 4 * sw)))
        v = scratch.buffer("wino.v", (36, c, (r1 - r0) * tw), x.dtype)
        np.matmul(kin, d.reshape(36, -1), out=v.reshape(36, -1))
        return v

    def products(v: np.ndarray, r0: int, r1: int, m0: int, m1: int) -> None:
        """Output channels m0..m1 of tile rows r0..r1."""
        t = v.shape[2]
        mm = scratch.buffer("wino.m", (36, m1 - m0, t), x.dtype)
        np.matmul(u[:, m0:m1], v, out=mm)
        out = scratch.buffer("wino.y", (4, 4, m1 - m0, r1 - r0, tw), x.dtype)
        np.matmul(kout, mm.reshape(36, -1), out=out.reshape(16, -1))
        _scatter(out, y[m0:m1], 4 * r0, min(ho, 4 * r1))

    flops = 72.0 * m * c * th * tw   # the 36 products dominate
    if rows < th:   # several chunks of tile rows: one piece each
        parallel.run_all(lambda r0: products(transformed(r0, min(th, r0 + rows)), r0, min(th, r0 + rows), 0, m),
                         range(0, th, rows), flops)
        return
    # one chunk (deep layers: few tiles, many channels): pieces are blocks of output
    # channels, of a size fixed by the shape, so the bits do not depend on the threads
    v = transformed(0, th)
    blocks = range(0, m, M_BLOCK) if m >= 2 * M_BLOCK else range(0, m, m)
    parallel.run_all(lambda m0: products(v, 0, th, m0, min(m, m0 + M_BLOCK) if m >= 2 * M_BLOCK else m),
                     blocks, flops)


def _scatter(tiles: np.ndarray, y: np.ndarray, lo: int, hi: int) -> None:
    """Write output tiles (4, 4, M, rows, tw) into rows lo..hi of y (M, Ho, Wo): one copy
    per tile position, each reading whole rows of tiles. (One strided copy of all 16 is
    slower: numpy walks it in y's order, 4 values at a time from far apart; 192 channels
    of 56x56, 401 -> 212 us.)"""
    wo = y.shape[2]
    for i in range(4):
        n_rows = len(range(lo + i, hi, 4))
        for j in range(4):
            n_cols = len(range(j, wo, 4))
            y[:, lo + i:hi:4, j::4] = tiles[i, j, :, :n_rows, :n_cols]
