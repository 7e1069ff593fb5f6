"""The exact Gelu in cache-sized pieces (``gelu_erf``) against the whole-tensor formula it
replaces, bit for bit: onnx Gelu-20, com.microsoft Gelu, BiasGelu and BiasSplitGelu, on
random inputs with their edge values and on the shapes the real models feed."""

from __future__ import annotations

import math

import numpy as np
import pytest

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
    with np.errstate(all="ignore"):
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
    with np.errstate(all="ignore"):
        xw, bw = x.astype(np.float32), b.astype(np.float32)   # float16 is computed in float32
        want_bias = _old_gelu64(xw + bw).astype(np.float32).astype(dtype)
        want = _old_gelu64(xw).astype(np.float32).astype(dtype)
        assert _same(contrib_act.bias_gelu(ctx, x, b), want_bias)
        assert _same(contrib_act.gelu(ctx, x), want)
    assert _same(x, x0) and _same(b, b0)


def test_bias_split_gelu_keeps_its_bits():
    x, b = _edgy((2, 16, 1280), np.float32), _edgy((1280,), np.float32)
    ctx = OpContext("BiasSplitGelu", {}, 1)
    with np.errstate(all="ignore"):
        h = x + b
        want = h[..., :640] * _old_gelu64(np.ascontiguousarray(h[..., 640:])).astype(np.float32)
        assert _same(contrib_act.bias_split_gelu(ctx, x, b), want.astype(np.float32))


def test_float64_stays_on_math_erfc():
    x = RNG.standard_normal(50) * 6
    ctx = OpContext("Gelu", {}, 1)
    want = 0.5 * x * np.vectorize(math.erfc)(-x / math.sqrt(2))
    assert _same(contrib_act.gelu(ctx, x), want)
    assert _same(nn.gelu(OpContext("Gelu", {}, 20), x), want)
