"""Per-channel steps with numpy's small buffer (``channels.apply``) against the plain
broadcast ufunc, bit for bit, and the Conv bias / BatchNorm kernels that use them."""

from __future__ import annotations

import numpy as np
import pytest

from graphexec.kernels import channels, conv, nn
from graphexec.kernels.registry import OpContext

RNG = np.random.default_rng(8)


def _edgy(shape: tuple[int, ...], dtype) -> np.ndarray:
    x = (RNG.standard_normal(shape) * 10.0 ** RNG.integers(-3, 4, size=shape)).astype(dtype)
    info = np.finfo(dtype)
    edges = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, info.smallest_subnormal, -info.smallest_subnormal,
                      info.tiny, info.max, -info.max], dtype)
    flat = x.reshape(-1)
    at = RNG.choice(flat.size, size=min(flat.size, 3 * edges.size), replace=False)
    flat[at] = np.resize(edges, at.size)
    return x


SHAPES = [(1, 136, 28, 28), (1, 64, 55, 55), (2, 16, 23, 29), (1, 272, 14, 14), (1, 8, 1, 600), (3, 5, 7)]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("ufunc", [np.add, np.multiply, np.subtract])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_apply_gives_the_broadcast_ufuncs_bits(shape, ufunc, dtype):
    x = _edgy(shape, dtype)
    c = _edgy((shape[1],) + (1,) * (len(shape) - 2), dtype)
    if len(shape) == 4:
        c = c.reshape(1, *c.shape)
    with np.errstate(all="ignore"):
        want = ufunc(x, c)
        got = channels.apply(ufunc, x, c, np.empty_like(x))
        inplace = x.copy()
        channels.apply(ufunc, inplace, c, inplace)
    assert got.tobytes() == want.tobytes() and inplace.tobytes() == want.tobytes()
    assert np.getbufsize() == 8192   # put back


def test_apply_restores_the_buffer_size_when_the_ufunc_fails():
    x = np.ones((1, 2, 40, 40), np.float32)
    with pytest.raises(ValueError):
        channels.apply(np.add, x, np.ones((1, 3, 1, 1), np.float32), x)
    assert np.getbufsize() == 8192


@pytest.mark.parametrize("shape,w", [((1, 16, 55, 55), (64, 16, 1, 1)), ((1, 32, 27, 27), (128, 32, 3, 3)),
                                     ((1, 136, 28, 28), (136, 1, 3, 3)), ((2, 8, 30, 30), (12, 8, 3, 3))])
def test_conv_bias_is_the_plain_add(shape, w):
    x, wt = _edgy(shape, np.float32), RNG.standard_normal(w).astype(np.float32)
    b = _edgy((w[0],), np.float32)
    groups = shape[1] if w[1] == 1 else 1
    ctx = OpContext("Conv", {"pads": [1, 1, 1, 1] if w[2] == 3 else [0, 0, 0, 0], "group": groups},
                    const_inputs=(False, True, True))
    with np.errstate(all="ignore"):
        plain = conv.conv(ctx, x, wt)
        plain += b.reshape(1, -1, 1, 1)
        got = conv.conv(ctx, x, wt, b)
    nan = np.isnan(plain)   # a NaN's sign and payload follow the BLAS kernel, not the formula
    assert np.array_equal(np.isnan(got), nan) and got[~nan].tobytes() == plain[~nan].tobytes()


@pytest.mark.parametrize("shape", [(1, 64, 56, 56), (1, 128, 28, 28), (1, 512, 7, 7), (2, 3, 40, 40)])
def test_batch_norm_into_out_is_the_plain_formula(shape):
    x = _edgy(shape, np.float32)
    c = shape[1]
    scale, bias, mean = (RNG.standard_normal(c).astype(np.float32) for _ in range(3))
    var = RNG.random(c).astype(np.float32) + 0.1
    ctx = OpContext("BatchNormalization", {"epsilon": 1e-5}, 15, const_inputs=(False, True, True, True, True))
    with np.errstate(all="ignore"):
        k = scale.reshape(-1, 1, 1) / np.sqrt(var.reshape(-1, 1, 1) + np.float32(1e-5))
        want = x * k + (bias.reshape(-1, 1, 1) - mean.reshape(-1, 1, 1) * k)
        got = nn.batch_norm(ctx, x, scale, bias, mean, var, out=np.empty_like(x))
    assert got.tobytes() == want.tobytes()


@pytest.mark.parametrize("sa,sb,run", [((1, 136, 28, 28), (1, 136, 1, 1), 784), ((128, 1536), (128, 1), 1536),
                                       ((128, 1), (128, 1536), 1536), ((32, 384), (384,), 1), ((4, 5, 6), (6,), 1),
                                       ((2, 3, 4, 5), (3, 1, 1), 20), ((7,), (1,), 7), ((1, 1), (1, 1), 1),
                                       ((2, 1, 5), (1, 3, 1), 5)])
def test_stride0_run(sa, sb, run):
    assert channels.stride0_run(sa, sb) == run


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div"])
@pytest.mark.parametrize("sa,sb", [((1, 64, 56, 56), (1, 64, 1, 1)), ((128, 1536), (128, 1)), ((128, 1), (128, 1536)),
                                   ((1, 32, 384), (1, 32, 1)), ((4, 9, 700), (700,)), ((3, 2, 8192), (3, 1, 1)),
                                   ((1, 16, 384), (1, 16, 1)), ((1, 64, 56, 56), (64, 1, 1)), ((1, 64, 24, 80), (1,))])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_broadcasting_arithmetic_keeps_numpys_bits(op, sa, sb, dtype):
    from graphexec.kernels import registry

    a, b = _edgy(sa, dtype), _edgy(sb, dtype)
    kernel = registry.lookup_def(op, "", 17).fn
    want = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide}[op]
    with np.errstate(all="ignore"):
        expected = want(a, b)
        got = kernel(OpContext(op), a, b)
        into = np.empty(expected.shape, dtype)
        got_into = kernel(OpContext(op), a, b, out=into)
    assert got.tobytes() == expected.tobytes() and got_into is into and into.tobytes() == expected.tobytes()
    assert np.getbufsize() == 8192


def test_apply_keeps_the_callers_errstate():
    x = np.full((1, 4, 30, 30), 3e38, np.float32)
    c = np.full((1, 4, 1, 1), 3e38, np.float32)
    before = np.geterr()
    with np.errstate(all="ignore"):
        channels.apply(np.add, x, c, x)   # overflows: no warning inside the caller's errstate
        assert np.geterr()["over"] == "ignore"
    assert np.geterr() == before and np.getbufsize() == 8192 and np.isinf(x).all()
