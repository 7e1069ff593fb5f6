"""The compiled float32 erf and Gelu (``kernels/_vmath.c``, glibc's libmvec) against the exact
functions (math.erf, x/2·erfc(-x/√2) in float64) over [-12, 12], both the AVX2 and the SSE
functions; edge values as the numpy formulas give them; and the kernels' switch: the Erf op,
Gelu and BiasGelu take it, GRAPHEXEC_PLAIN the numpy formulas, within float32 rounding."""

from __future__ import annotations

import math

import numpy as np
import pytest

from graphexec import _switch
from graphexec.kernels import erf as erf_mod
from graphexec.kernels import gelu_erf, vmath

pytestmark = pytest.mark.skipif(vmath._vmath is None, reason="_vmath.c not built (not x86-64 glibc)")

GRID = np.linspace(-12, 12, 24001).astype(np.float32)
EDGES = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1.2e-38, -1.2e-38, 3e38, -3e38,
                  4.0, -4.0, 9.9, -9.9, 16.0, -16.0, 40.0, -40.0], np.float32)


@pytest.fixture(params=[True, False], ids=["avx2", "sse"])
def isa(request):
    was = vmath._vmath.use_avx2(request.param)
    yield
    vmath._vmath.use_avx2(was)


def _rel(y, exact):
    nz = exact != 0
    return float(np.max(np.abs(y[nz].astype(np.float64) - exact[nz]) / np.abs(exact[nz])))


def test_erf_against_the_exact_erf(isa):
    y = np.empty_like(GRID)
    vmath.erf(GRID, y)
    exact = np.array([math.erf(v) for v in GRID.astype(np.float64)])
    assert _rel(y, exact) < 2.5e-7
    np.testing.assert_array_equal(y[::-1], -y)   # odd


def test_gelu_keeps_relative_accuracy_in_the_tail(isa):
    y = np.empty_like(GRID)
    vmath.gelu(GRID, y)
    exact = np.array([0.5 * v * math.erfc(-v / math.sqrt(2)) for v in GRID.astype(np.float64)])
    assert _rel(y, exact) < 5e-7


@pytest.mark.parametrize("n", [1, 3, 7, 8, 9, 17])
def test_edges_and_tails_as_the_numpy_formulas(isa, n):
    x = np.resize(EDGES, n * len(EDGES) // 4 + n)   # lengths that end in a partial vector
    with np.errstate(all="ignore"):
        ye, yg = np.empty_like(x), np.empty_like(x)
        vmath.erf(x, ye)
        vmath.gelu(x, yg)
        with _switch.plain():
            pe, pg = erf_mod.erf32(x), gelu_erf.gelu_erf(x, np.dtype(np.float32))
    # the numpy Gelu runs in float64 on the plain path; subnormal outputs are left to atol
    np.testing.assert_allclose(ye, pe, rtol=3e-7, atol=0)
    np.testing.assert_allclose(yg, pg, rtol=6e-7, atol=1e-40)
    assert np.array_equal(np.isnan(yg), np.isnan(pg)) and np.array_equal(np.isinf(yg), np.isinf(pg))


def test_refusals():
    x = np.ones(8, np.float32)
    assert not vmath.usable(x, np.empty(8, np.float64))
    assert not vmath.usable(x, x)                       # overlapping
    assert not vmath.usable(np.ones(16, np.float32)[::2], np.empty(8, np.float32))
    with _switch.plain():
        assert not vmath.usable(x, np.empty(8, np.float32))
    with pytest.raises(ValueError, match="one size"):
        vmath.erf(x, np.empty(7, np.float32))


def test_the_ops_take_it_and_plain_takes_numpy():
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((4, 300)) * 3).astype(np.float32)
    bias = rng.standard_normal(300).astype(np.float32)
    fast_e = erf_mod.erf(None, x)   # type: ignore[arg-type]   # Erf reads nothing from its context
    fast_g = gelu_erf.gelu_erf(x, np.dtype(np.float32), bias)
    with _switch.plain():
        plain_e = erf_mod.erf(None, x)   # type: ignore[arg-type]
        plain_g = gelu_erf.gelu_erf(x, np.dtype(np.float32), bias)
    np.testing.assert_allclose(fast_e, plain_e, rtol=4e-7, atol=1e-7)
    np.testing.assert_allclose(fast_g, plain_g, rtol=6e-7, atol=1e-7)
    assert not np.array_equal(fast_e, plain_e) and not np.array_equal(fast_g, plain_g)
