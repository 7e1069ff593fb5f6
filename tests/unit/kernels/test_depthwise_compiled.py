"""The compiled depthwise loop (``kernels/_dwconv.c`` through ``depthwise.run``) against its
definition: every output is +0 plus each tap's float32 product in row-major tap order,
over the zero-padded image. numpy's float32 multiply and add round each operation as the C
loop (built without fused multiply-adds) does, so the two agree bit for bit, NaN and inf in
the image included. Strides, dilations, pads, kernel sizes, the specialised 3x3/5x5 loops
and the generic one; then the Conv op's switch: non-finite filters and GRAPHEXEC_PLAIN take
the numpy path, which agrees within float32 rounding."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graphexec import _switch
from graphexec.kernels import conv2d, depthwise

pytestmark = pytest.mark.skipif(depthwise._dwconv is None, reason="_dwconv.c not built")

_EDGES = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, 3e38, -3e38], np.float32)


def _ordered(x, w, kernel, strides, dil, begin, out):
    """The definition, tap by tap in float32."""
    (kh, kw), (sh, sw), (dh, dw), (ho, wo) = kernel, strides, dil, out
    span_h, span_w = (ho - 1) * sh + (kh - 1) * dh + 1, (wo - 1) * sw + (kw - 1) * dw + 1
    xp = np.zeros((x.shape[0], max(span_h, begin[0] + x.shape[1]), max(span_w, begin[1] + x.shape[2])), np.float32)
    xp[:, begin[0]:begin[0] + x.shape[1], begin[1]:begin[1] + x.shape[2]] = x
    acc = np.zeros((x.shape[0], ho, wo), np.float32)
    for i in range(kh):
        for j in range(kw):
            tap = xp[:, i * dh:i * dh + (ho - 1) * sh + 1:sh, j * dw:j * dw + (wo - 1) * sw + 1:sw]
            acc = acc + w[:, 0, i, j][:, None, None] * tap
    return acc


def _case(rng, c, h, w, k, strides, dil, pads, edges):
    x = rng.standard_normal((c, h, w)).astype(np.float32)
    if edges:
        flat = x.reshape(-1)
        n = int(rng.integers(0, flat.size // 8 + 2))
        flat[rng.integers(0, flat.size, n)] = rng.choice(_EDGES, n)
    f = rng.standard_normal((c, 1, *k)).astype(np.float32)
    return x, f


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 20), st.integers(1, 23), st.integers(1, 23), st.sampled_from([(3, 3), (5, 5), (1, 1), (3, 1),
                                                                                    (7, 7), (2, 4)]),
       st.sampled_from([(1, 1), (2, 2), (1, 2), (2, 1), (3, 3)]), st.sampled_from([(1, 1), (2, 2), (1, 3)]),
       st.tuples(*[st.integers(0, 3)] * 4), st.booleans(), st.integers(0, 2**31))
def test_the_compiled_loop_is_the_ordered_tap_sum(c, h, w, k, strides, dil, pads, edges, seed):
    rng = np.random.default_rng(seed)
    span = [(kk - 1) * d + 1 for kk, d in zip(k, dil)]
    ext = [n + pads[a] + pads[a + 2] for a, n in enumerate((h, w))]
    if ext[0] < span[0] or ext[1] < span[1]:
        return
    out = [(e - sp) // s + 1 for e, sp, s in zip(ext, span, strides)]
    x, f = _case(rng, c, h, w, k, strides, dil, pads, edges)
    y = np.full((c, *out), 7, np.float32)
    with np.errstate(all="ignore"):
        assert depthwise.run(x, f, list(k), list(strides), list(dil), [pads[0], pads[1]], y)
        want = _ordered(x, f, k, strides, dil, pads[:2], out)
    np.testing.assert_array_equal(y, want)


def test_a_strided_view_and_the_refusals():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 9, 18)).astype(np.float32)[:, :, ::2]   # not contiguous: copied
    f = rng.standard_normal((4, 1, 3, 3)).astype(np.float32)
    y = np.empty((4, 9, 9), np.float32)
    assert depthwise.run(x, f, [3, 3], [1, 1], [1, 1], [1, 1], y)
    np.testing.assert_array_equal(y, _ordered(x, f, (3, 3), (1, 1), (1, 1), (1, 1), (9, 9)))
    assert not depthwise.run(x.astype(np.float64), f.astype(np.float64), [3, 3], [1, 1], [1, 1], [1, 1],
                             y.astype(np.float64))
    assert not depthwise.run(x, f, [3, 3], [1, 1], [1, 1], [1, 1], np.empty((4, 9, 18), np.float32)[:, :, ::2])
    with _switch.plain():
        assert not depthwise.run(x, f, [3, 3], [1, 1], [1, 1], [1, 1], y)
    with pytest.raises(ValueError, match="buffer sizes"):
        depthwise.run(x, f[:3], [3, 3], [1, 1], [1, 1], [1, 1], y)   # 3 filters for 4 channels


class _Ctx:
    const_inputs = (False, True)

    def __init__(self) -> None:
        self.cache: dict = {}


@pytest.mark.parametrize("finite", [True, False])
def test_conv_takes_the_loop_and_agrees_with_the_numpy_path(finite, monkeypatch):
    """fast_conv's depthwise: the compiled loop, or numpy for a non-finite filter (0·inf at a
    pad is NaN there) and under the plain switch; the two agree within float32 rounding."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 16, 14, 14)).astype(np.float32)
    f = rng.standard_normal((16, 1, 3, 3)).astype(np.float32)
    if not finite:
        f[3, 0, 0, 0] = np.inf
    geo = conv2d.Geometry([3, 3], [1, 1], [1, 1], [1, 1], [14, 14])
    calls = []
    loop = depthwise._dwconv
    monkeypatch.setattr(depthwise, "_dwconv", SimpleNamespace(depthwise=lambda *a: calls.append(loop.depthwise(*a))))
    with np.errstate(all="ignore"):
        fast = conv2d.fast_conv(_Ctx(), x, f, None, 16, geo, None)
        ran = len(calls)
        with _switch.plain():
            plain = conv2d.fast_conv(_Ctx(), x, f, None, 16, geo, None)
    assert ran == (len(x) if finite else 0) and len(calls) == ran   # once an image; never under the plain switch
    if finite:
        # another order of summation than BLAS's: equal bits under some OpenBLAS kernels
        # (Sandybridge), one rounding apart under others
        np.testing.assert_allclose(fast, plain, rtol=1e-5, atol=1e-5)
    else:
        np.testing.assert_array_equal(fast, plain)   # both numpy: NaN at the padded corner
        assert np.isnan(fast[:, 3, 0, 0]).all()
