"""Kept padded frames, the cached conv geometry and the pools' fused first fold: each gives
exactly the bytes of the plain way it replaces (numpy's pad, a fresh geometry, copy-then-fold)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import graphexec.kernels.conv as conv_mod
from graphexec.kernels import pool, scratch
from graphexec.kernels.registry import OpContext

RNG = np.random.default_rng(7)


def _np_padded(x, begin, shape, value):
    """The oracle: numpy's pad, then cut to ``shape`` (rows or columns past it left out)."""
    (top, left), (hp, wp) = begin, shape
    xp = np.pad(x, ((0, 0), (top, max(0, hp)), (left, max(0, wp))), constant_values=value)
    return xp[:, :hp, :wp]


@pytest.mark.parametrize("begin,shape,value", [((1, 1), (9, 8), 0), ((0, 2), (6, 10), -np.inf),
                                               ((2, 0), (5, 5), 0), ((1, 1), (4, 4), 3.5)])
def test_a_kept_frame_is_numpys_pad_on_every_call(begin, shape, value):
    for _ in range(3):   # later calls reuse the frame: only its interior is written again
        x = RNG.standard_normal((3, 7, 6)).astype(np.float32)
        got = scratch.padded("t.frame", x, begin, shape, value)
        assert got.tobytes() == _np_padded(x, begin, shape, value).astype(np.float32).tobytes()


def test_frames_of_different_geometries_do_not_disturb_each_other():
    x, z = RNG.standard_normal((2, 5, 5)).astype(np.float32), RNG.standard_normal((2, 4, 6)).astype(np.float32)
    a = scratch.padded("t.mix", x, (1, 1), (7, 7))
    b = scratch.padded("t.mix", z, (1, 1), (6, 8))       # another shape: another frame
    c = scratch.padded("t.mix", x, (0, 0), (7, 7), -1)   # another offset and value
    again = scratch.padded("t.mix", x * 2, (1, 1), (7, 7))
    assert again is a and b is not a and c is not a
    assert again.tobytes() == _np_padded(x * 2, (1, 1), (7, 7), 0).tobytes()
    assert b.tobytes() == _np_padded(z, (1, 1), (6, 8), 0).tobytes()
    assert c.tobytes() == _np_padded(x, (0, 0), (7, 7), -1).astype(np.float32).tobytes()


def test_frames_stay_within_their_budget(monkeypatch):
    monkeypatch.setattr(scratch, "FRAMES_KEPT", 3 * 9 * 9 * 4 + 100)
    scratch.release()
    x = RNG.standard_normal((3, 7, 7)).astype(np.float32)
    first = scratch.padded("t.cap", x, (1, 1), (9, 9))
    second = scratch.padded("t.cap2", x, (1, 1), (9, 9))   # over the budget: the kept ones are dropped
    assert second is not first and scratch.padded("t.cap2", x, (1, 1), (9, 9)) is second
    big = RNG.standard_normal((3, 20, 20)).astype(np.float32)
    lone = scratch.padded("t.big", big, (1, 1), (22, 22))  # bigger than the budget: a fresh array
    assert lone is not scratch.padded("t.big", big, (1, 1), (22, 22))
    assert lone.tobytes() == _np_padded(big, (1, 1), (22, 22), 0).tobytes()
    scratch.release()


def _conv_model(pads, group):
    w = RNG.standard_normal((6, 6 // group, 3, 3)).astype(np.float32)
    b = RNG.standard_normal(6).astype(np.float32)
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=pads, group=group)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), w, b


@pytest.mark.parametrize("group", [1, 2, 6])
def test_the_cached_geometry_follows_the_input_shape(group):
    model, w, b = _conv_model([1, 0, 1, 2], group)
    ref = ReferenceEvaluator(model)
    kept = OpContext("Conv", {"pads": [1, 0, 1, 2], "group": group}, const_inputs=(False, True, True))
    for shape in [(1, 6, 8, 9), (2, 6, 5, 12), (1, 6, 8, 9)]:   # one node, inputs of several shapes
        x = RNG.standard_normal(shape).astype(np.float32)
        fresh = OpContext("Conv", {"pads": [1, 0, 1, 2], "group": group}, const_inputs=(False, True, True))
        got = conv_mod.conv(kept, x, w, b)
        assert got.tobytes() == conv_mod.conv(fresh, x, w, b).tobytes()
        np.testing.assert_allclose(got, ref.run(None, {"x": x})[0], rtol=1e-5, atol=1e-5)
    assert sum(1 for k in kept.cache if k[0] == "conv.geometry") == 2


def test_a_fed_filter_recomputes_the_geometry():
    ctx = OpContext("Conv", {"pads": [1, 1, 1, 1]}, const_inputs=(False, False))
    conv_mod.conv(ctx, RNG.standard_normal((1, 2, 5, 5)).astype(np.float32),
                  RNG.standard_normal((3, 2, 3, 3)).astype(np.float32))
    assert ctx.cache == {}


@pytest.mark.parametrize("fold", [np.maximum, np.add])
@pytest.mark.parametrize("k", [1, 2, 3, 5])
def test_fused_first_fold_is_copy_then_fold(fold, k):
    taps = [RNG.standard_normal((4, 6, 7)).astype(np.float32) for _ in range(k)]
    taps[0][0, 0, 0], taps[-1][1, 2, 3] = np.nan, -0.0
    plain = np.empty_like(taps[0])
    np.copyto(plain, taps[0])
    for t in taps[1:]:
        fold(plain, t, out=plain)
    got = np.empty_like(plain)
    pool._fold_taps(got, taps, lambda a, b, out: np.copyto(out, b), fold)
    assert got.tobytes() == plain.tobytes()


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
@pytest.mark.parametrize("strides,pads", [([2, 2], [1, 1, 1, 1]), ([1, 1], [1, 1, 1, 1]), ([2, 1], [0, 1, 1, 0])])
def test_pools_against_the_reference(op, strides, pads):
    x = RNG.standard_normal((1, 5, 13, 11)).astype(np.float32)
    node = helper.make_node(op, ["x"], ["y"], kernel_shape=[3, 3], strides=strides, pads=pads)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    want = ReferenceEvaluator(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])).run(None, {"x": x})[0]
    ctx = OpContext(op, {"kernel_shape": [3, 3], "strides": strides, "pads": pads})
    fn = pool.max_pool if op == "MaxPool" else pool.average_pool
    for _ in range(2):   # the second call reuses the kept padded frame
        np.testing.assert_allclose(fn(ctx, x), want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("n", [100, 5000, 2 * (1 << 15) - 1, 2 * (1 << 15) + 17, 8 * (1 << 15), 5 << 20])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_blocked_relu_is_numpys_maximum(n, dtype):
    from graphexec.kernels.elementwise import relu

    x = (RNG.standard_normal(n) * 100).astype(dtype)
    if x.dtype.kind == "f":
        x[:4] = [np.nan, -np.nan, -0.0, np.inf]
    want = np.maximum(x, np.zeros_like(x))
    assert relu(x).tobytes() == want.tobytes()
    out = np.empty_like(x)
    assert relu(x, out=out) is out and out.tobytes() == want.tobytes()
    y = x.copy()
    assert relu(y, out=y) is y and y.tobytes() == want.tobytes()   # in place, as a Relu after its conv
    strided = x[::2]
    assert relu(strided).tobytes() == np.maximum(strided, 0).tobytes()


@pytest.mark.parametrize("ho,wo", [(8, 12), (7, 10), (5, 5)])
def test_winograd_scatter_places_every_tile_value(ho, wo):
    from graphexec.kernels import winograd

    m, rows, tw = 3, -(-ho // 4), -(-wo // 4)
    tiles = RNG.standard_normal((4, 4, m, rows, tw)).astype(np.float32)
    y = np.full((m, ho + 2, wo), np.nan, np.float32)
    winograd._scatter(tiles, y, 1, 1 + ho)
    full = tiles.transpose(2, 3, 0, 4, 1).reshape(m, 4 * rows, 4 * tw)   # y[m, 4r+i, 4t+j] = tiles[i, j, m, r, t]
    assert y[:, 1:1 + ho].tobytes() == full[:, :ho, :wo].tobytes()
    assert np.isnan(y[:, 0]).all() and np.isnan(y[:, 1 + ho:]).all()


def _random_bits(shape):
    """float32 of random bit patterns: NaNs with payloads, infinities, subnormals, -0."""
    return RNG.integers(0, 2**32, shape, dtype=np.uint64).astype(np.uint32).view(np.float32)


@pytest.mark.parametrize("view", [np.s_[:, ::2, ::2], np.s_[:, 1::2, 1::2], np.s_[:, :, 1::2], np.s_[1:, 1:7:2, 0:9:2],
                                  np.s_[:, ::3, ::2]])
def test_copy_every_other_is_a_copy_bit_for_bit(view):
    x = _random_bits((3, 9, 10))
    src = x[view]
    got = np.empty(src.shape, np.float32)
    scratch.copy_every_other(got, src)
    assert got.tobytes() == np.ascontiguousarray(src).tobytes()


def test_copy_every_other_falls_back_where_the_trick_does_not_apply():
    from numpy.lib.stride_tricks import as_strided

    x = _random_bits((2, 6, 8))
    for src in [x[:, :, 1::2], x[:, :, ::-2], x.astype(np.float64)[:, :, ::2], x[:, :, ::3]]:
        got = np.empty(src.shape, src.dtype)   # the last pair would end past the buffer; reversed; float64; stride 3
        scratch.copy_every_other(got, src)
        assert got.tobytes() == np.ascontiguousarray(src).tobytes()
    view = as_strided(x, (2, 3, 3), (x.strides[0], 2 * x.strides[1], 8))
    got = np.empty(view.shape, np.float32)
    scratch.copy_every_other(got, view, within=x)
    assert got.tobytes() == np.ascontiguousarray(view).tobytes()


@pytest.mark.parametrize("k,s,pads", [(1, 2, [0, 0]), (3, 2, [0, 0]), (3, 2, [1, 1]), (2, 2, [0, 0]), (7, 2, [3, 3])])
def test_im2col_columns_are_the_windows_in_c_i_j_order(k, s, pads):
    """The column matrix (from x itself when nothing is padded, stride-2 taps copied as
    pairs) gives exactly the one GEMM on numpy's own windows."""
    from numpy.lib.stride_tricks import sliding_window_view

    from graphexec.kernels import conv2d

    c, h, m = 3, 17, 5
    x, w = RNG.standard_normal((c, h, h)).astype(np.float32), RNG.standard_normal((m, c, k, k)).astype(np.float32)
    ho = (h + 2 * pads[0] - k) // s + 1
    geo = conv2d.Geometry([k, k], [s, s], [1, 1], pads, [ho, ho])
    y = np.empty((m, ho * ho), np.float32)
    conv2d._im2col_gemm(x, w.reshape(m, -1), geo, y)
    xp = np.pad(x, ((0, 0), (pads[0], pads[0]), (pads[1], pads[1])))
    win = sliding_window_view(xp, (k, k), axis=(1, 2))[:, ::s, ::s][:, :ho, :ho]   # (c, ho, wo, k, k)
    cols = np.ascontiguousarray(win.transpose(0, 3, 4, 1, 2)).reshape(c * k * k, -1)
    assert y.tobytes() == np.matmul(w.reshape(m, -1), cols).tobytes()


def test_the_cached_geometries_of_a_node_stay_few():
    """A node fed ever new input shapes keeps the geometry of the latest GEOMETRIES only,
    and still computes what a fresh context does."""
    _, w, b = _conv_model([1, 1, 1, 1], 1)
    kept = OpContext("Conv", {"pads": [1, 1, 1, 1]}, const_inputs=(False, True, True))
    for width in range(4, 4 + 2 * conv_mod.GEOMETRIES):
        x = RNG.standard_normal((1, 6, 5, width)).astype(np.float32)
        fresh = OpContext("Conv", {"pads": [1, 1, 1, 1]}, const_inputs=(False, True, True))
        assert conv_mod.conv(kept, x, w, b).tobytes() == conv_mod.conv(fresh, x, w, b).tobytes()
    assert sum(1 for k in kept.cache if k[0] == "conv.geometry") == conv_mod.GEOMETRIES
