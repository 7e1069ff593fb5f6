"""Kernels run a big tensor in cache-sized pieces (``kernels/pieces.py``): Erf, Softmax,
LayerNormalization, QuantizeLinear and DequantizeLinear give the whole call's bits, NaN
signs and payloads included, over shapes whose sizes fall on and off the piece boundaries
and edge values (inf, NaN, +-0, subnormals, the largest floats). ``PIECE`` and numpy's
buffer are made small (for both calls) so the shapes stay small."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graphexec.kernels import elementwise, nn, pieces, quant
from graphexec.kernels.registry import OpContext

_F32 = np.dtype(np.float32)
_EDGES = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1.2e-38, 3e38, -3e38, 0.5, -2.5, 88.7, -104.0],
                  np.float32)
_SHAPES = st.lists(st.integers(1, 40), min_size=1, max_size=3).map(tuple)


def _x(shape: tuple[int, ...], seed: int, scale: int = 3) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * 10.0 ** rng.integers(-scale, scale + 1, shape)).astype(np.float32)
    flat = x.reshape(-1)
    k = max(1, flat.size // 8)
    flat[rng.integers(0, flat.size, k)] = rng.choice(_EDGES, k)
    return x


def _both(piece: int, call) -> tuple[np.ndarray, np.ndarray, bool]:
    """(the result with pieces of ``piece`` elements, the whole call's, whether pieces ran)."""
    ran = []
    real_flat, real_rows = pieces.flat, pieces.rows

    def spy(real):
        def run(*a):
            done = real(*a)
            ran.append(done)
            return done
        return run

    old = np.setbufsize(BUF)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(pieces, "flat", spy(real_flat))
        mp.setattr(pieces, "rows", spy(real_rows))
        mp.setattr(pieces, "PIECE", piece)
        got = call()
        mp.setattr(pieces, "PIECE", 1 << 40)
        want = call()
    np.setbufsize(old)
    return got, want, any(ran)


BUF = 64   # numpy's buffer size in these tests (the default is 8192)


def _rows_step(n: int, piece: int) -> int | None:
    """The rows per piece ``pieces.rows`` takes for rows of ``n`` (None: it refuses)."""
    unit = BUF // math.gcd(n, BUF)
    step = unit * max(1, piece // (unit * n))
    return None if step * n > 4 * piece else step


def _run(kernel, ctx, x, *args, out_dtype=_F32):
    with np.errstate(all="ignore"):
        out = np.full(x.shape, 7, out_dtype)
        y = kernel(ctx, x, *args, out=out)
        return y.copy()


@settings(max_examples=60, deadline=None)
@given(_SHAPES, st.sampled_from([64, 128, 200]), st.integers(0, 2**31))
def test_erf_in_pieces(shape, piece, seed):
    x = _x(shape, seed)
    got, want, ran = _both(piece, lambda: _run(elementwise.erf, OpContext("Erf"), x))
    step = max(BUF, piece // BUF * BUF)
    assert got.tobytes() == want.tobytes() and ran == (x.size >= 2 * step)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 80), st.integers(65, 200), st.sampled_from([1024, 4096]), st.integers(0, 2**31))
def test_softmax_in_pieces(rows, n, piece, seed):
    x = _x((rows, n), seed, 1)
    ctx = OpContext("Softmax", {"axis": -1}, opset=13)
    got, want, ran = _both(piece, lambda: _run(nn.softmax, ctx, x))
    step = _rows_step(n, piece)
    assert got.tobytes() == want.tobytes() and ran == (step is not None and rows >= 2 * step)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 80), st.integers(2, 90), st.booleans(), st.integers(0, 2**31))
def test_layer_norm_in_pieces(rows, n, bias, seed):
    x = _x((1, rows, n), seed, 2)
    rng = np.random.default_rng(seed + 1)
    scale, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    ctx = OpContext("LayerNormalization", {"axis": -1, "epsilon": 1e-5}, opset=17)
    got, want, ran = _both(1024, lambda: _run(nn.layer_norm, ctx, x, scale, b if bias else None))
    step = _rows_step(n, 1024)
    assert got.tobytes() == want.tobytes() and ran == (step is not None and rows >= 2 * step)


@settings(max_examples=60, deadline=None)
@given(_SHAPES, st.sampled_from([np.int8, np.uint8]), st.sampled_from([1e-3, 0.07, 2.0, 1e-40]),
       st.integers(0, 2**31))
def test_quantize_and_dequantize_in_pieces(shape, dtype, scale, seed):
    x = _x(shape, seed)
    s = np.array(scale, np.float32)
    zp = np.array(np.random.default_rng(seed).integers(np.iinfo(dtype).min, np.iinfo(dtype).max), dtype)
    q, want_q, ran = _both(64, lambda: _run(quant.quantize_linear, OpContext("QuantizeLinear"), x, s, zp,
                                                        out_dtype=dtype))
    assert q.dtype == dtype and q.tobytes() == want_q.tobytes() and ran == (x.size >= 128)
    dq, want_dq, ran = _both(64, lambda: _run(quant.dequantize_linear, OpContext("DequantizeLinear"),
                                                          q, s, zp))
    assert dq.tobytes() == want_dq.tobytes() and ran == (x.size >= 128)


def test_pieces_run_only_where_they_may():
    """Pieces hold a multiple of numpy's buffer and start on one; other layouts are refused."""
    x = np.ones((4, 100), np.float32)
    seen = []
    assert not pieces.flat(lambda a, b: seen.append(a.size), x, np.empty_like(x))   # below two pieces
    old, buf = pieces.PIECE, np.setbufsize(64)
    try:
        pieces.PIECE = 100                                                    # rounded down to 64
        assert not pieces.flat(lambda a, b: None, x, x)                       # in place
        assert not pieces.flat(lambda a, b: None, x, np.empty((400,), np.float32))   # another shape
        assert not pieces.flat(lambda a, b: None, x.T, np.empty_like(x.T))    # not C-contiguous
        assert pieces.flat(lambda a, b: seen.append(a.size), x, np.empty_like(x))
        assert seen == [64] * 6 + [16]
        seen.clear()
        y = np.ones((40, 24), np.float32)                                     # 8 rows make 3 buffers
        assert pieces.rows(lambda a, b: seen.append(a.shape), y, np.empty_like(y))
        assert seen == [(8, 24)] * 5
        assert not pieces.rows(lambda a, b: None, np.ones((40, 7), np.float32), np.empty((40, 7), np.float32))
    finally:
        pieces.PIECE = old
        np.setbufsize(buf)


@pytest.mark.parametrize("shape", [(1, 6, 400, 400), (1, 400, 1536)])
def test_real_sizes_run_in_pieces(shape):
    """The smart_turn sizes take the pieces (the defaults), with the whole call's bits."""
    x = _x(shape, 5, 1)
    whole = elementwise.erf32(x, np.empty_like(x))
    out = np.empty_like(x)
    assert pieces.flat(elementwise.erf32, x, out) and out.tobytes() == whole.tobytes()
