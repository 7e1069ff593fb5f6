"""The transformer kernels' fast paths (float32 Gelu of the com.microsoft ops, in-place
attention) against the plain formulas they replace and against onnxruntime's CPU kernels."""

from __future__ import annotations

import math

import numpy as np
import pytest
from contrib_oracle import check, one_node, rand, run_ort, run_ours

from graphexec.kernels import contrib_act, contrib_attention, contrib_norm, nn, quant, quant_gemm, quant_matmul, rnn, rnn_cells
from graphexec.kernels.registry import OpContext

RNG = np.random.default_rng(11)


@pytest.mark.parametrize("op,inputs", [("BiasGelu", 2), ("Gelu", 1)])
@pytest.mark.parametrize("dt,tol", [(np.float32, 2e-6), (np.float16, 3e-3)])
def test_com_microsoft_gelu_matches_onnxruntime(op, inputs, dt, tol):
    x = rand(4, 32, 96, dtype=dt, scale=3.0)
    ins = [x, rand(96, dtype=dt)][:inputs]
    check(op, ins, rtol=tol, atol=tol)


def test_bias_gelu_leaves_its_inputs_alone_and_float64_keeps_full_precision():
    a, b = rand(2, 8), rand(8)
    a0, b0 = a.copy(), b.copy()
    model = one_node("Gelu", [a])
    run_ours(model, [a])
    run_ours(one_node("BiasGelu", [a, b]), [a, b])
    assert np.array_equal(a, a0) and np.array_equal(b, b0)
    ctx = OpContext("Gelu", {}, 1)
    x64 = RNG.standard_normal(64) * 6
    tail = 0.5 * x64 * np.vectorize(math.erfc)(-x64 / math.sqrt(2))   # no cancellation for x < 0
    np.testing.assert_allclose(contrib_act.gelu(ctx, x64), tail, rtol=1e-12, atol=1e-300)
    assert np.array_equal(contrib_act.gelu(ctx, x64[:4]), nn.gelu(OpContext("Gelu", {}, 20), x64[:4]))


def _plain_attend(q, k, v, bias, scale):
    s = np.matmul(q, k.swapaxes(-1, -2)) * q.dtype.type(scale)
    if bias is not None:
        s = s + bias
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return np.matmul(e / e.sum(axis=-1, keepdims=True), v).transpose(0, 2, 1, 3), s


@pytest.mark.parametrize("bias_shape", [None, (2, 1, 5, 7), (1, 1, 5, 7), (2, 3, 5, 7), (2, 3, 1, 7)])
def test_attend_in_place_matches_the_plain_formula(bias_shape):
    q, k, v = rand(2, 3, 5, 4), rand(2, 3, 7, 4), rand(2, 3, 7, 6)
    bias = None if bias_shape is None else rand(*bias_shape)
    out, kept = contrib_attention.attend(q, k, v, bias, 0.5, keep_scores=True)
    want, scores = _plain_attend(q, k, v, bias, 0.5)
    assert out.shape == (2, 5, 3, 6) and out.dtype == np.float32
    np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-6)
    assert np.array_equal(kept, scores)
    assert contrib_attention.attend(q, k, v, bias, 0.5)[1] is None


def test_attend_with_a_bias_wider_than_the_scores_broadcasts_as_before():
    q, k, v = rand(1, 1, 5, 4), rand(1, 1, 7, 4), rand(1, 1, 7, 4)
    bias = rand(2, 3, 5, 7)
    out, _ = contrib_attention.attend(q, k, v, bias, 1.0)
    want, _ = _plain_attend(q, k, v, bias, 1.0)
    np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-6)


def test_attention_with_mask_and_past_matches_onnxruntime():
    b, s, d, heads, p = 2, 6, 16, 4, 3
    x, w, bias = rand(b, s, d), rand(d, 3 * d, scale=0.3), rand(3 * d)
    mask = np.array([[1] * (p + s), [1] * (p + s - 2) + [0, 0]], dtype=np.int32)
    past = rand(2, b, heads, p, d // heads)
    model = one_node("Attention", [x, w, bias, mask, past], num_outputs=2, num_heads=heads)
    ours, ref = run_ours(model, [x, w, bias, mask, past]), run_ort(model, [x, w, bias, mask, past])
    for o, r in zip(ours, ref):
        np.testing.assert_allclose(o, r, rtol=1e-5, atol=1e-5)


# --- weights laid out once: MatMulNBits (K, N), integer GEMM weights in int16 -----------------------

def _pack(values: np.ndarray, bits: int) -> np.ndarray:
    stream = ((values[..., None] >> np.arange(bits)) & 1).astype(np.uint8)
    return np.packbits(stream.reshape(values.shape[:-1] + (-1,)), axis=-1, bitorder="little")


def _plain_nbits(b, scales, zps, n, k, bits, block):
    """The (N, K) dequantization the (K, N) layout replaced: (q - zp) * scale per block."""
    kb = -(-k // block)
    q = quant_gemm.unpack_bits(b.reshape(n, kb, -1), bits, block).astype(np.float32)
    s = scales.astype(np.float32).reshape(n, kb, 1)
    if zps is None:
        z = np.float32(1 << (bits - 1))
    elif zps.dtype == np.uint8:
        z = quant_gemm.unpack_bits(zps.reshape(n, -1), bits, kb).astype(np.float32).reshape(n, kb, 1)
    else:
        z = zps.astype(np.float32).reshape(n, kb, 1)
    return ((q - z) * s).reshape(n, kb * block)[:, :k]


@pytest.mark.parametrize("bits,block,k", [(4, 32, 64), (4, 16, 72), (8, 32, 40), (2, 16, 48), (3, 16, 32)])
@pytest.mark.parametrize("zps", ["none", "packed", "float"])
def test_nbits_weights_are_the_plain_dequantization_transposed_bit_for_bit(bits, block, k, zps):
    n, kb = 10, -(-k // block)
    b = _pack(RNG.integers(0, 1 << bits, (n, kb, block)), bits)
    scales = RNG.uniform(0.01, 1.0, (n, kb)).astype(np.float32)
    z = {"none": None, "packed": _pack(RNG.integers(0, 1 << bits, (n, kb)), bits),
         "float": RNG.uniform(0, (1 << bits) - 1, (n, kb)).astype(np.float32)}[zps]
    ctx = OpContext("MatMulNBits", {"N": n, "K": k, "bits": bits, "block_size": block}, 1)
    got = quant_gemm._nbits_weights(ctx, b, scales, z)
    assert got.shape == (k, n) and got.flags.c_contiguous
    assert np.array_equal(got, _plain_nbits(b, scales, z, n, k, bits, block).T)
    a = rand(3, k)
    y = quant_gemm.matmul_nbits(ctx, a, b, scales, z)
    np.testing.assert_allclose(y, a @ _plain_nbits(b, scales, z, n, k, bits, block).T, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("wdt,zp", [(np.int8, None), (np.int8, 3), (np.uint8, 128), (np.uint8, 255)])
def test_int_weights_in_int16_match_the_float64_shift(wdt, zp):
    lo, hi = np.iinfo(wdt).min, np.iinfo(wdt).max + 1
    w = RNG.integers(lo, hi, (96, 40)).astype(wdt)
    zpa = None if zp is None else np.array(zp, dtype=wdt)
    ctx = OpContext("MatMulInteger", {}, 10, 1, "", (False, True, False, True))
    iw = quant_matmul.int_weights(ctx, (1, 3), (-2,), lambda: quant_matmul.shifted(w, zpa, dtype=np.dtype(np.int16)))
    plain = quant_matmul.shifted(w, zpa)   # float64
    assert iw.ints.dtype == np.int16 and np.array_equal(iw.ints, plain)
    assert iw.f32.dtype == np.float32 and np.array_equal(iw.f32, plain)
    assert iw.l1 == int(np.abs(plain).sum(axis=0).max())
    assert iw._f64 is None and np.array_equal(iw.f64, plain) and iw.f64 is iw.f64
    assert ctx.cache["int_w"] is iw


@pytest.mark.parametrize("k", [64, 1536])   # 1536: float32 is not exact, the float64 GEMM runs
def test_matmul_integer_exact_both_ways(k):
    a = RNG.integers(0, 256, (4, 7, k)).astype(np.uint8)
    w = RNG.integers(-128, 128, (k, 9)).astype(np.int8)
    w[:, 0] = -128   # the widest column: L1 = 128 k
    azp = np.array(131, np.uint8)
    ctx = OpContext("MatMulInteger", {}, 10, 1, "", (False, True, True, False))
    got = quant_matmul.matmul_integer(ctx, a, w, azp)
    want = np.matmul(a.astype(np.int64) - 131, w.astype(np.int64))
    assert got.dtype == np.int32 and np.array_equal(got, want)
    assert ctx.cache["int_w"].exact32(quant_matmul.reach(a.dtype, azp)) == (k == 64)


# --- DynamicQuantizeLSTM's per-step quantization -------------------------------------------------

def _fake_quant_cases():
    r = np.random.default_rng(5)
    for trial in range(400):
        d, h = 1 + trial % 2, (1, 3, 17, 256)[trial % 4]
        x = (r.standard_normal((d, 2, h)) * r.uniform(1e-3, 10)).astype(np.float32)
        x = np.abs(x) if trial % 7 == 0 else -np.abs(x) if trial % 11 == 0 else x
        if trial % 13 == 0:
            x[:] = 0
        if trial % 5 == 0:
            x.flat[0] = -0.0
        yield x
    yield np.float32([[[np.nan, 1.0]], [[0.5, -0.5]]])
    yield np.float32([[[np.inf, 1.0]]])
    yield np.float32([[[1e-45, -1e-45]]])


def test_fake_quant_into_is_fake_quant_bit_for_bit():
    for x in _fake_quant_cases():
        out = np.empty_like(x)
        with np.errstate(all="ignore"):   # the edge cases divide by a zero or NaN scale, as the plain path does
            got = rnn._fake_quant_into(x, out)
            want = rnn.fake_quant(x, (1, 2))
        assert got is out
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), x


# --- SkipLayerNormalization / EmbedLayerNormalization: in place, the same bits -------------------

def _ln17(x, g, b, eps):
    return nn.layer_norm(OpContext("LayerNormalization", {"axis": -1, "epsilon": eps}, 17, 3), x, g, b)


@pytest.mark.parametrize("outputs", [1, 4])
@pytest.mark.parametrize("with_bias", [False, True])
def test_skip_layer_norm_is_the_plain_sum_and_norm_bit_for_bit(outputs, with_bias):
    x, skip, g, b = rand(2, 5, 16), rand(2, 5, 16), rand(16), rand(16)
    bias = rand(16) if with_bias else None
    ctx = OpContext("SkipLayerNormalization", {"epsilon": 1e-5}, 1, outputs)
    got = contrib_norm.skip_layer_norm(ctx, x, skip, g, b, bias)
    s = x + skip if bias is None else x + skip + bias
    y, mean, inv = _ln17(s, g, b, 1e-5)
    want = (y, mean, inv, s)[:outputs] if outputs > 1 else y
    for o, w in zip(got if outputs > 1 else [got], want if outputs > 1 else [want]):
        assert o.dtype == w.dtype and np.array_equal(o, w)
    if outputs > 1:
        assert not np.shares_memory(got[0], got[3])


@pytest.mark.parametrize("position_ids", [False, True])
def test_embed_layer_norm_is_the_plain_lookup_and_norm_bit_for_bit(position_ids):
    ids = RNG.integers(0, 50, (2, 7)).astype(np.int32)
    seg = RNG.integers(0, 2, (2, 7)).astype(np.int32)
    word, pos, segt, g, b = rand(50, 16), rand(9, 16), rand(2, 16), rand(16), rand(16)
    pids = RNG.integers(0, 9, (2, 7)).astype(np.int32) if position_ids else None
    ctx = OpContext("EmbedLayerNormalization", {"epsilon": 1e-5}, 1, 3)
    y, index, e = contrib_norm.embed_layer_norm(ctx, ids, seg, word, pos, segt, g, b, None, pids)
    p = np.broadcast_to(np.arange(7), ids.shape) if pids is None else pids
    plain = word[ids] + pos[p] + segt[seg]
    assert np.array_equal(e, plain) and np.array_equal(y, _ln17(plain, g, b, 1e-5)[0])
    assert np.array_equal(index, np.zeros(2, np.int32))


# --- Q/DQ: constant parameters worked out once per node -----------------------------------------

@pytest.mark.parametrize("attrs,sshape", [({}, ()), ({"axis": 1}, (6,)), ({"axis": 2, "block_size": 4}, (2, 6, 2))])
@pytest.mark.parametrize("zdt", [np.uint8, np.int8, None])
def test_qdq_with_constant_parameters_match_the_uncached_path_bit_for_bit(attrs, sshape, zdt):
    x = (rand(2, 6, 8) * 4).astype(np.float32)
    x.flat[:3] = [np.nan, np.inf, -np.inf]
    scale = RNG.uniform(0.01, 0.1, sshape).astype(np.float32)
    zp = None if zdt is None else RNG.integers(-5 if zdt is np.int8 else 0, 5 if zdt is np.int8 else 9,
                                               sshape).astype(zdt)
    const = OpContext("QuantizeLinear", attrs, 21, 1, "", (False, True, True))
    plain = OpContext("QuantizeLinear", attrs, 21, 1, "", (False, False, False))
    for _ in range(2):   # the second call reads the node's cache
        with np.errstate(invalid="ignore"):
            q = quant.quantize_linear(const, x, scale, zp)
            want = quant.quantize_linear(plain, x, scale, zp)
        assert q.dtype == want.dtype and np.array_equal(q, want)
        dconst = OpContext("DequantizeLinear", attrs, 21, 1, "", (False, True, True))
        d = quant.dequantize_linear(dconst, q, scale, zp)
        d2 = quant.dequantize_linear(dconst, q, scale, zp)
        want_d = quant.dequantize_linear(OpContext("DequantizeLinear", attrs, 21, 1), q, scale, zp)
        assert np.array_equal(d.view(np.uint32), want_d.view(np.uint32)) and np.array_equal(d2, d)
    assert ("q", x.shape) in const.cache and not plain.cache
    # a new shape on the same node (a dynamic dim) gets its own entry
    if not attrs.get("block_size"):
        y = x[:1]
        assert np.array_equal(quant.quantize_linear(const, y, scale, zp), quant.quantize_linear(plain, y, scale, zp))


# --- Gemm: attributes read once per node, C's broadcast checked without np.broadcast_shapes -----

@pytest.mark.parametrize("cshape", [(), (1,), (5,), (1, 5), (4, 1), (4, 5), (1, 1)])
def test_fits_into_is_numpys_unidirectional_broadcast(cshape):
    for y in [(4, 5), (1, 5), (4, 1)]:
        try:
            want = np.broadcast_shapes(cshape, y) == y
        except ValueError:
            want = False
        assert nn._fits_into(cshape, y) == want


@pytest.mark.parametrize("ta,tb,alpha,beta", [(0, 0, 1.0, 1.0), (1, 0, 0.5, 1.0), (0, 1, 1.0, 2.0), (1, 1, 2.0, 0.0)])
def test_gemm_with_cached_attributes_matches_the_formula_on_every_run(ta, tb, alpha, beta):
    a, b, c = rand(3, 4) if not ta else rand(4, 3), rand(4, 5) if not tb else rand(5, 4), rand(5)
    ctx = OpContext("Gemm", {"transA": ta, "transB": tb, "alpha": alpha, "beta": beta}, 13)
    aa, bb = (a.T if ta else a), (b.T if tb else b)
    want = np.matmul(aa, bb)
    if alpha != 1.0:
        want *= np.float32(alpha)
    if beta != 0.0:
        want += c * np.float32(beta) if beta != 1.0 else c
    for _ in range(2):
        got = nn.gemm(ctx, a, b, c, out=np.empty((3, 5), np.float32))
        assert np.array_equal(got, want)
    assert ctx.cache["gemm"] == (alpha, beta, bool(ta), bool(tb))


@pytest.mark.parametrize("clip", [None, 0.7])
@pytest.mark.parametrize("act", ["sigmoid", "relu"])   # relu returns a new array: the gates are sliced anew
def test_lstm_plain_loop_with_views_made_once_is_the_general_loop_bit_for_bit(clip, act):
    d, b, hsz, steps = 2, 3, 5, 6
    xw = rand(steps, d, b, 4 * hsz)
    rt = rand(d, hsz, 4 * hsz, scale=0.5)
    h0, c0 = rand(d, b, hsz), rand(d, b, hsz)
    acts = (rnn_cells.activation(act, 0.0, 0.0), rnn_cells.activation("tanh", 0.0, 0.0),
            rnn_cells.activation("tanh", 0.0, 0.0))

    def rec_into(h, out):
        np.matmul(h, rt, out=out)

    fast = rnn_cells.lstm_loop(xw, lambda h, t: h @ rt, h0, c0.copy(), None, acts, clip, False, None, rec_into)
    plain = rnn_cells.lstm_loop(xw, lambda h, t: h @ rt, h0, c0.copy(), None, acts, clip, False, None, None)
    for x, y in zip(fast, plain):
        assert np.array_equal(x.view(np.uint32), y.view(np.uint32))


@pytest.mark.parametrize("b,n,s,t", [(1, 12, 32, 32), (2, 4, 7, 19), (1, 2, 1, 5)])
@pytest.mark.parametrize("biased", [False, True])
def test_attend_keeps_the_plain_formulas_bits(b, n, s, t, biased):
    """attend against the formula as the kernel first wrote it (q k^T, scaled, biased, a
    softmax along the last axis, then v), bit for bit: a key-major rewrite that summed down
    columns changed 45-84% of the outputs by an ulp or so and was reverted."""
    from graphexec.kernels.contrib_attention import attend

    rng = np.random.default_rng(b * 1000 + n * 100 + s * 10 + t)
    q, k, v = (rng.standard_normal(shape).astype(np.float32) for shape in
               ((b, n, s, 8), (b, n, t, 8), (b, n, t, 8)))
    bias = rng.standard_normal((b, n, s, t)).astype(np.float32) if biased else None
    scores = np.matmul(q, k.swapaxes(-1, -2)) * np.float32(0.125)
    if bias is not None:
        scores = scores + bias
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    plain = np.matmul(e / e.sum(axis=-1, keepdims=True), v).transpose(0, 2, 1, 3)
    out, kept = attend(q, k, v, bias, 0.125, keep_scores=True)
    assert out.tobytes() == np.ascontiguousarray(plain).tobytes()
    assert kept.tobytes() == scores.tobytes()
