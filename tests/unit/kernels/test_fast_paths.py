"""The kernels' fast paths (BLAS convolutions, Winograd, separable pools, cached BatchNorm
coefficients, ``out=``) against the general paths they bypass."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import graphexec.kernels.conv as conv_mod
from graphexec.kernels import conv2d, nn, parallel, pool, scratch, tensor, winograd
from graphexec.kernels.registry import OpContext, lookup

RNG = np.random.default_rng(0)


def _general_conv(monkeypatch, ctx, x, w, b):
    with monkeypatch.context() as m:
        m.setattr(conv_mod, "fast_conv", lambda *a, **k: None)
        return conv_mod.conv(ctx, x, w, b)


CASES = [  # (channels, groups, out channels, kernel, stride, dilation, pads)
    (8, 1, 6, 1, 1, 1, 0), (8, 1, 6, 1, 2, 1, 0), (8, 1, 6, 3, 1, 1, 1), (8, 1, 6, 3, 2, 2, 2),
    (8, 1, 6, 5, 1, 1, 0), (8, 2, 6, 3, 1, 1, 1), (8, 4, 8, 1, 1, 1, 0), (8, 8, 8, 3, 1, 1, 1),
    (8, 8, 8, 3, 2, 1, 1), (8, 8, 8, 3, 1, 2, 2), (8, 8, 8, 5, 1, 1, 2),
]


@pytest.mark.parametrize("c,g,m,k,s,d,p", CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_conv_fast_paths_match_the_general_one(monkeypatch, c, g, m, k, s, d, p, dtype):
    x = RNG.standard_normal((2, c, 11, 9)).astype(dtype)
    w = RNG.standard_normal((m, c // g, k, k)).astype(dtype)
    b = RNG.standard_normal(m).astype(dtype)
    ctx = OpContext("Conv", {"group": g, "strides": [s, s], "dilations": [d, d], "pads": [p, p + 1, p, p]})
    ref = _general_conv(monkeypatch, ctx, x, w, b)
    out = np.empty(ref.shape, dtype)
    got = conv_mod.conv(ctx, x, w, b, out=out)
    assert got is out
    np.testing.assert_allclose(got, ref, rtol=1e-5 if dtype == np.float32 else 1e-12, atol=1e-5)


def test_winograd_matches_direct_and_caches_constant_filters(monkeypatch):
    x = RNG.standard_normal((1, 64, 30, 27)).astype(np.float32)
    w = RNG.standard_normal((40, 64, 3, 3)).astype(np.float32)
    assert winograd.worth_it(64, 40, 30, 27)
    const = OpContext("Conv", {"pads": [1, 0, 2, 1]}, const_inputs=(False, True))
    ref = _general_conv(monkeypatch, const, x, w, None)
    got = conv_mod.conv(const, x, w)
    assert np.abs(got - ref).max() <= 1e-5 * np.abs(ref).max()
    assert "winograd" in const.cache
    fed = OpContext("Conv", {"pads": [1, 0, 2, 1]}, const_inputs=(False, False))
    conv_mod.conv(fed, x, w)
    assert fed.cache == {}   # a filter fed at run time may change: nothing kept


def test_chunked_convolution_gives_the_same_bits_on_threads(monkeypatch):
    from concurrent.futures import ThreadPoolExecutor

    monkeypatch.setattr(conv2d, "CHUNK_BYTES", 1 << 14)   # many chunks
    monkeypatch.setattr(parallel, "MIN_FLOPS", 0)          # split even this small one
    x = RNG.standard_normal((1, 16, 40, 40)).astype(np.float32)
    w = RNG.standard_normal((24, 16, 3, 3)).astype(np.float32)
    ctx = OpContext("Conv", {"pads": [1, 1, 1, 1]})
    alone = conv_mod.conv(ctx, x, w)
    with ThreadPoolExecutor(3) as pool_, parallel.lend(pool_, 3):
        shared = conv_mod.conv(ctx, x, w)
    assert alone.tobytes() == shared.tobytes()


@pytest.mark.parametrize("op,k,s,p,ceil", [(op, k, s, p, c) for op, k, s, p, c in itertools.product(
    ["MaxPool", "AveragePool"], [2, 3], [1, 2], [0, 1], [0, 1]) if 2 * p < k])
def test_pools_match_the_tap_loop(monkeypatch, op, k, s, p, ceil):
    x = RNG.standard_normal((2, 3, 10, 13)).astype(np.float32)
    x[0, 0, :4, :4] = np.nan   # an all-NaN window: MaxPool gives the lowest value, as before
    ctx = OpContext(op, {"kernel_shape": [k, k], "strides": [s, s], "pads": [p] * 4, "ceil_mode": ceil})
    fn = pool.max_pool if op == "MaxPool" else pool.average_pool
    with monkeypatch.context() as m:
        m.setattr(pool, "_fast_2d", lambda *a: None)
        ref = fn(ctx, x)
    out = np.empty(ref.shape, np.float32)
    got = fn(ctx, x, out=out)
    assert got is out
    if op == "MaxPool":
        assert got.tobytes() == ref.tobytes()
    else:
        np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-6, equal_nan=True)


def test_batch_norm_coefficients_are_cached_only_for_constants():
    x = RNG.standard_normal((2, 5, 4, 4)).astype(np.float32)
    params = [RNG.random(5).astype(np.float32) + 0.5 for _ in range(4)]
    const = OpContext("BatchNormalization", {}, 15, 1, "bn", (False, True, True, True, True))
    fed = OpContext("BatchNormalization", {}, 15, 1, "bn", (False, True, True, True, False))
    want = (x - params[2].reshape(5, 1, 1)) / np.sqrt(params[3].reshape(5, 1, 1) + 1e-5) \
        * params[0].reshape(5, 1, 1) + params[1].reshape(5, 1, 1)
    for ctx in (const, fed, const):
        out = np.empty_like(x)
        assert nn.batch_norm(ctx, x, *params, out=out) is out
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)
    assert const.cache and not fed.cache


def test_elementwise_write_into_out_only_when_it_fits():
    ctx = OpContext("Add")
    add, relu, total = lookup("Add", "", 17), lookup("Relu", "", 17), lookup("Sum", "", 17)
    a, b = RNG.standard_normal((3, 4)).astype(np.float32), RNG.standard_normal(4).astype(np.float32)
    out = np.empty((3, 4), np.float32)
    assert add(ctx, a, b, out=out) is out and np.array_equal(out, a + b)
    assert add(ctx, a, b, out=np.empty((2, 3, 4), np.float32)).shape == (3, 4)   # never broadcast into out
    assert relu(OpContext("Relu"), a, out=out) is out and np.array_equal(out, np.maximum(a, 0))
    assert total(OpContext("Sum"), a, b, a, out=out) is out and np.array_equal(out, a + b + a)
    nan = np.array([np.nan, -0.0, -1.0, 2.0], np.float32)
    assert relu(OpContext("Relu"), nan).tobytes() == np.maximum(nan, 0).tobytes()


def test_tensor_kernels_fill_out():
    out = np.empty((2, 3), np.float32)
    ctx = OpContext("ConstantOfShape", {"value": np.array([1.5], np.float32)}, 17)
    assert tensor.constant_of_shape(ctx, np.array([2, 3]), out=out) is out and (out == 1.5).all()
    xs = [RNG.standard_normal((2, 1)).astype(np.float32), RNG.standard_normal((2, 2)).astype(np.float32)]
    cat = tensor.concat(OpContext("Concat", {"axis": 1}), *xs, out=out)
    assert cat is out and np.array_equal(out, np.concatenate(xs, axis=1))
    g = nn.gemm(OpContext("Gemm", {"transB": 1}), xs[1], xs[1], np.ones(2, np.float32),
                out=np.empty((2, 2), np.float32))
    np.testing.assert_allclose(g, xs[1] @ xs[1].T + 1, rtol=1e-6)


def test_scratch_constants_are_read_only_and_padding_is_zeroed():
    z = scratch.constant(0, (3, 4), np.float32)
    assert not z.flags.writeable and (z == 0).all()
    x = np.ones((2, 3, 3), np.float32)
    first = scratch.padded("t.x", x * 5, (1, 1), (5, 5))
    again = scratch.padded("t.x", x, (1, 1), (5, 5))
    assert again is not None and again.sum() == x.sum() and first.base is again.base
