"""The exact Gelu in cache-sized pieces (``gelu_erf``) against the whole-tensor formula it
replaces, bit for bit on the plain path (float64 math): onnx Gelu-20, com.microsoft Gelu,
BiasGelu and BiasSplitGelu, on random inputs with their edge values and on the shapes the
real models feed; the float32 fast path within the golden tolerance of the plain one."""

from __future__ import annotations

import math

import numpy as np
import pytest

from graphexec import _switch
from graphexec.kernels import contrib_act, gelu_erf, nn
from graphexec.kernels.registry import OpContext

RNG = np.random.default_rng(20)
_ERFC = (0.17087277, -0.82215223, 1.48851587, -1.13520398, 0.27886807,
         -0.18628806, 0.09678418, 0.37409196, 1.00002368, -1.26551223)


def _old_gelu64(x: np.ndarray) -> np.ndarray:
    """The formula as it was written before the pieces (nn._gelu_erf, float16/32 branch)."""
    xd = x.astype(np.float64)
    a = np.abs(xd)
    a *= 1 / math.sqrt(2)
    t = a * 0.5
    t += 1.0
    np.reciprocal(t, out=t)
    p = t * _ERFC[0]
    p += _ERFC[1]
    for c in _ERFC[2:]:
        p *= t
        p += c
    p -= a * a
    np.exp(p, out=p)
    p *= t
    p *= -0.5
    p += np.greater(xd, 0.0, out=a)
    np.abs(p, out=p)
    p *= xd
    return p


def _edgy(shape: tuple[int, ...], dtype) -> np.ndarray:
    """Normal values (spread as activations are) with the edge values sprinkled in: both
    tails, zeros of both signs, infinities, NaN, denormals and the extremes of the dtype."""
    x = (RNG.standard_normal(shape) * RNG.choice([0.5, 3.0, 12.0], size=shape)).astype(dtype)
    info = np.finfo(dtype)
    edges = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, info.tiny, -info.tiny, info.smallest_subnormal,
                      -info.smallest_subnormal, info.max, -info.max, 40.0, -40.0, -5.5, 5.5, 1e-30], dtype)
    flat = x.reshape(-1)
    at = RNG.choice(flat.size, size=min(flat.size, 4 * edges.size), replace=False)
    flat[at] = np.resize(edges, at.size)
    if flat.size > gelu_erf.WHOLE:   # edges at the pieces' seams too
        flat[gelu_erf.BLOCK - 1:gelu_erf.BLOCK + 2] = [np.nan, -np.inf, -info.smallest_subnormal]
    return x


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


SHAPES = [(), (1,), (7,), (3, 5), (1, 32, 1536), (1, 128, 1536), (2, 64, 3072), (1, 12, 384),
          (5, gelu_erf.BLOCK + 3), (gelu_erf.WHOLE + 1,), (1, 1, 10000)]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_pieces_give_the_whole_formulas_bits(shape, dtype):
    x = _edgy(shape, dtype)
    with np.errstate(all="ignore"), _switch.plain():
        want = _old_gelu64(x.reshape(-1)).astype(dtype).reshape(shape)
        got = gelu_erf.gelu_erf(x, np.dtype(dtype))
        assert _same(got, want)
        assert _same(gelu_erf.gelu_erf_whole(x.reshape(-1)), _old_gelu64(x.reshape(-1)))
        assert _same(nn.gelu(OpContext("Gelu", {}, 20), x), want)


@pytest.mark.parametrize("shape", [(1, 32, 1536), (1, 128, 1536), (2, 7, 1536), (4, 32, 96), (1, 1, 10000),
                                   (2, gelu_erf.WHOLE + 5), (3, 1), (6,)])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_com_microsoft_gelu_and_bias_gelu_keep_their_bits(shape, dtype):
    x, b = _edgy(shape, dtype), _edgy(shape[-1:], dtype)
    x0, b0 = x.copy(), b.copy()
    ctx = OpContext("BiasGelu", {}, 1)
    with np.errstate(all="ignore"), _switch.plain():
        xw, bw = x.astype(np.float32), b.astype(np.float32)   # float16 is computed in float32
        want_bias = _old_gelu64(xw + bw).astype(np.float32).astype(dtype)
        want = _old_gelu64(xw).astype(np.float32).astype(dtype)
        assert _same(contrib_act.bias_gelu(ctx, x, b), want_bias)
        assert _same(contrib_act.gelu(ctx, x), want)
    assert _same(x, x0) and _same(b, b0)


def test_bias_split_gelu_keeps_its_bits():
    x, b = _edgy((2, 16, 1280), np.float32), _edgy((1280,), np.float32)
    ctx = OpContext("BiasSplitGelu", {}, 1)
    with np.errstate(all="ignore"), _switch.plain():
        h = x + b
        want = h[..., :640] * _old_gelu64(np.ascontiguousarray(h[..., 640:])).astype(np.float32)
        assert _same(contrib_act.bias_split_gelu(ctx, x, b), want.astype(np.float32))


def test_float64_stays_on_math_erfc():
    x = RNG.standard_normal(50) * 6
    ctx = OpContext("Gelu", {}, 1)
    want = 0.5 * x * np.vectorize(math.erfc)(-x / math.sqrt(2))
    assert _same(contrib_act.gelu(ctx, x), want)
    assert _same(nn.gelu(OpContext("Gelu", {}, 20), x), want)


@pytest.mark.parametrize("shape", [(1, 32, 1536), (5, gelu_erf.BLOCK + 3), (gelu_erf.WHOLE + 1,), (3, 5)])
def test_float32_fast_path_is_within_the_elementwise_tolerance(shape):
    """float32 math (``_piece32``) against the float64 plain path: the golden comparison's
    elementwise rule (16 ulps of |y| + 2**-10 of the largest |y|), NaN and infinities where
    the plain path has them; also on a dense grid of [-12, 12], tails included."""
    for x in (_edgy(shape, np.float32), np.linspace(-12, 12, 200_001, dtype=np.float32)):
        b = _edgy(x.shape[-1:], np.float32)
        with np.errstate(all="ignore"):
            got = [gelu_erf.gelu_erf(x, np.dtype(np.float32)),
                   contrib_act.bias_gelu(OpContext("BiasGelu", {}, 1), x, b)]
            with _switch.plain():
                want = [gelu_erf.gelu_erf(x, np.dtype(np.float32)),
                        contrib_act.bias_gelu(OpContext("BiasGelu", {}, 1), x, b)]
        for g, w in zip(got, want):
            assert g.dtype == w.dtype == np.float32 and g.shape == w.shape
            fin = np.isfinite(w)
            assert np.array_equal(g[~fin], w[~fin], equal_nan=True)
            g64, w64 = g[fin].astype(np.float64), w[fin].astype(np.float64)
            scale = np.abs(w64) + np.abs(w64).max(initial=0) / 1024
            assert (np.abs(g64 - w64) <= 16 * np.finfo(np.float32).eps * scale + np.finfo(np.float32).tiny).all()
