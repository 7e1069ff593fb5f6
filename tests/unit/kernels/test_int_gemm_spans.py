"""Integer GEMMs cut along K into spans that are each exact in float32 (``quant_matmul``'s
``cuts`` and ``_in_spans``) give the int64 product exactly: random 8-bit operands with zero
points, extreme weights, vectors and stacks of B, with the exactness bound lowered so that
many spans are cut; the real bound on a K that float32 cannot take whole; GRAPHEXEC_PLAIN's
float64 GEMM gives the same integers."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graphexec import _switch
from graphexec.kernels import quant_matmul as qm


class _Ctx:
    const_inputs = (False, True, False, True)

    def __init__(self) -> None:
        self.cache: dict = {}


def _exact(a, a_zp, b, b_zp):
    av = a.astype(np.int64) - (0 if a_zp is None else a_zp.astype(np.int64))
    bv = b.astype(np.int64) - (0 if b_zp is None else b_zp.astype(np.int64))
    return np.matmul(av, bv)


def _ints(rng, dtype, shape, extreme):
    lo, hi = (0, 255) if dtype == np.uint8 else (-128, 127)
    if extreme:
        return rng.choice(np.array([lo, hi], dtype), shape)
    return rng.integers(lo, hi + 1, shape).astype(dtype)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 9), st.integers(1, 700), st.integers(1, 12), st.sampled_from(["2d", "vector", "stack"]),
       st.sampled_from([np.uint8, np.int8]), st.sampled_from([np.uint8, np.int8]), st.booleans(), st.booleans(),
       st.integers(10, 24), st.integers(0, 2**31))
def test_spans_give_the_int64_product(m, k, n, form, adt, bdt, zps, extreme, bound_bits, seed):
    rng = np.random.default_rng(seed)
    a = _ints(rng, adt, (m, k), extreme)
    bshape = {"2d": (k, n), "vector": (k,), "stack": (2, k, n)}[form]
    b = _ints(rng, bdt, bshape, extreme)
    a_zp = _ints(rng, adt, (), False) if zps else None
    b_zp = _ints(rng, bdt, (n,) if form != "vector" else (), False) if zps else None
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(qm, "EXACT32", 1 << bound_bits)
        mp.setattr(qm, "MIN_CUT", 1)
        got = qm.int_matmul(_Ctx(), a, None if a_zp is None else np.asarray(a_zp), b,
                            None if b_zp is None else np.asarray(b_zp), (1, 3))
    assert got.dtype in (np.float32, np.float64)
    np.testing.assert_array_equal(got.astype(np.int64), _exact(a, a_zp, b, b_zp))


def test_a_long_k_goes_in_float32_spans_and_plain_in_float64():
    rng = np.random.default_rng(2)
    a = rng.choice(np.array([0, 255], np.uint8), (16, 2048))
    b = rng.choice(np.array([-128, 127], np.int8), (2048, 24))
    a[0], b[:, 0] = 255, 127   # one sum of 2048 * 255 * 127, past 2**24
    ctx = _Ctx()
    w = qm.int_weights(ctx, (1,), (-2,), lambda: qm.shifted(b, None, dtype=np.dtype(np.int16)))
    assert not w.exact32(255)
    spans = w.cuts(255)
    assert spans is not None and len(spans) == 4 and spans[0][0] == 0 and spans[-1][1] == 2048
    limit, mag = (1 << 24) // 255, np.abs(w.ints.astype(np.int64))
    for (s, e), nxt in zip(spans, spans[1:] + [None]):
        assert mag[s:e].sum(axis=0).max() <= limit   # exact in float32
        assert nxt is None or mag[s:e + 1].sum(axis=0).max() > limit   # as long as it can be
    fast = qm.int_matmul(ctx, a, None, b, None, (1,))
    with _switch.plain():
        plain = qm.int_matmul(_Ctx(), a, None, b, None, (1,))
    want = _exact(a, None, b, None)
    assert np.abs(want).max() > 1 << 24   # float32 could not hold the whole sums
    np.testing.assert_array_equal(fast.astype(np.int64), want)
    np.testing.assert_array_equal(plain.astype(np.int64), want)


def test_short_spans_fall_back_to_float64():
    w = np.full((300, 4), 127, np.int16)
    assert qm._cuts(w, 127 * 10) is None   # spans of 10 < MIN_CUT
    assert qm._cuts(w, 127 * 100) == [(0, 100), (100, 200), (200, 300)]
