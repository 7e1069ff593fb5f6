"""Erf runs a big tensor in cache-sized pieces (``kernels/pieces.py``) and gives the whole
call's bits, NaN signs and payloads included, over shapes whose sizes fall on and off the piece boundaries
and edge values (inf, NaN, +-0, subnormals, the largest floats). ``PIECE`` and numpy's
buffer are made small (for both calls) so the shapes stay small."""

from __future__ import annotations

import math

import numpy as np
import onnx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import graphexec as gx
from graphexec.kernels import erf, pieces, vmath
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
    real_flat = pieces.flat

    def spy(real):
        def run(*a):
            done = real(*a)
            ran.append(done)
            return done
        return run

    old = np.setbufsize(BUF)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(vmath, "built", lambda: False)   # the numpy path is the one that runs in pieces
        mp.setattr(pieces, "flat", spy(real_flat))
        mp.setattr(pieces, "PIECE", piece)
        got = call()
        mp.setattr(pieces, "PIECE", 1 << 40)
        want = call()
    np.setbufsize(old)
    return got, want, any(ran)


BUF = 64   # numpy's buffer size in these tests (the default is 8192)


def _run(kernel, ctx, x, *args, out_dtype=_F32):
    with np.errstate(all="ignore"):
        out = np.full(x.shape, 7, out_dtype)
        y = kernel(ctx, x, *args, out=out)
        return y.copy()


@settings(max_examples=60, deadline=None)
@given(_SHAPES, st.sampled_from([64, 128, 200]), st.integers(0, 2**31))
def test_erf_in_pieces(shape, piece, seed):
    x = _x(shape, seed)
    got, want, ran = _both(piece, lambda: _run(erf.erf, OpContext("Erf"), x))
    step = max(BUF, piece // BUF * BUF)
    assert got.tobytes() == want.tobytes() and ran == (x.size >= 2 * step)


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
        assert not pieces.flat(lambda a, b: None, x, np.empty(x.shape, np.float16))   # another dtype
        assert pieces.flat(lambda a, b: seen.append(a.size), x, np.empty_like(x))
        assert seen == [64] * 6 + [16]
    finally:
        pieces.PIECE = old
        np.setbufsize(buf)


@pytest.mark.parametrize("shape", [(1, 6, 400, 400), (1, 400, 1536)])
def test_real_sizes_run_in_pieces(shape):
    """The smart_turn sizes take the pieces (the defaults), with the whole call's bits."""
    x = _x(shape, 5, 1)
    whole = erf.erf32(x, np.empty_like(x))
    out = np.empty_like(x)
    assert pieces.flat(erf.erf32, x, out) and out.tobytes() == whole.tobytes()


@pytest.mark.parametrize("declared", [onnx.TensorProto.INT32, onnx.TensorProto.FLOAT16])
def test_a_big_erf_with_a_wrongly_declared_output_keeps_its_values(declared):
    """A model's value_info may declare another dtype for Erf's output: a tensor big enough
    for pieces still gets float32 erf values (pieces refuse an out of another dtype)."""
    h = onnx.helper
    shape = [1, 400, 1536]
    g = h.make_graph([h.make_node("Erf", ["x"], ["e"]), h.make_node("Neg", ["e"], ["z"])], "erf",
                     [h.make_tensor_value_info("x", onnx.TensorProto.FLOAT, shape)],
                     [h.make_tensor_value_info("z", onnx.TensorProto.FLOAT, None)],
                     value_info=[h.make_tensor_value_info("e", declared, shape)])
    x = np.full(shape, 0.5, np.float32)
    z = gx.Session(gx.load(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]))).run({"x": x}).outputs["z"]
    assert z.dtype == np.float32 and np.all(z == -np.float32(math.erf(0.5)))
