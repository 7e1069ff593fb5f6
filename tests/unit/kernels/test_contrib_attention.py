"""ONNX Runtime's attention ops (Attention, MultiHeadAttention, GroupQueryAttention) and
RotaryEmbedding against onnxruntime's CPU kernels; forms ORT's CPU kernel lacks (packed
MHA inputs, Megatron's 4-D mask) against ORT on the equivalent unpacked inputs."""

from __future__ import annotations

import numpy as np
import pytest
from contrib_oracle import check, check_formula, one_node, rand, run_ort, run_ours

import graphexec as gx
from graphexec.errors import UnsupportedOpError

B, S, N, H, L = 2, 4, 2, 4, 5
D = N * H
i32 = lambda *v: np.array(v, np.int32)  # noqa: E731
TOL = {"rtol": 1e-4, "atol": 1e-5}
F16 = {"rtol": 3e-3, "atol": 3e-3}


def _mask3(b: int, s: int, t: int) -> np.ndarray:
    m = (np.random.default_rng(1).random((b, s, t)) > 0.4).astype(np.int32)
    m[..., 0] = 1  # keep one key per row: fully masked rows are ill-conditioned at -10000
    return m


# --- Attention -------------------------------------------------------------------------------------------

MASKS = {"none": None, "1d": i32(3, 2), "1d_zero": i32(0, 4), "2b": i32(3, 4, 1, 0),
         "3b+2": i32(3, 4, 0, 0, 0, 2, 3, 4), "2d": i32([1, 1, 0, 1], [0, 0, 0, 0]),
         "2d_dummy": np.ones((1, 1), np.int32), "3d": _mask3(B, S, S)}


@pytest.mark.parametrize("mask", sorted(MASKS))
@pytest.mark.parametrize("unidirectional", [0, 1])
def test_attention_masks(mask, unidirectional):
    x, w, b = rand(B, S, 8), rand(8, 3 * D), rand(3 * D)
    check("Attention", [x, w, b, MASKS[mask]], num_heads=N, unidirectional=unidirectional, **TOL)


@pytest.mark.parametrize("mask", [None, np.ones((B, S + 3), np.int32), i32(5, 6)])
@pytest.mark.parametrize("unidirectional", [0, 1])
def test_attention_past_present(mask, unidirectional):
    ins = [rand(B, S, 8), rand(8, 3 * D), rand(3 * D), mask, rand(2, B, N, 3, H)]
    check("Attention", ins, 2, num_heads=N, unidirectional=unidirectional, **TOL)


def test_attention_decoding_one_token_with_past():
    ins = [rand(B, 1, 8), rand(8, 3 * D), rand(3 * D), None, rand(2, B, N, 6, H)]
    check("Attention", ins, 2, num_heads=N, unidirectional=1, **TOL)


@pytest.mark.parametrize("attrs,ab_shape", [({"qkv_hidden_sizes": [D, D, 6]}, None), ({"scale": 0.3}, None),
                                            ({"mask_filter_value": -3.0}, None), ({}, (1, N, S, S)),
                                            ({}, (B, 1, S, S)), ({"unidirectional": 1}, (B, N, S, S))])
def test_attention_attributes_and_attention_bias(attrs, ab_shape):
    d_qkv = sum(attrs.get("qkv_hidden_sizes", [D] * 3))
    ins = [rand(B, S, 8), rand(8, d_qkv), rand(d_qkv), i32([1, 1, 0, 1], [1, 0, 1, 1]), None,
           None if ab_shape is None else rand(*ab_shape)]
    check("Attention", ins, num_heads=N, **attrs, **TOL)


def test_attention_without_bias_and_in_half():
    check("Attention", [rand(B, S, 8), rand(8, 3 * D)], num_heads=N, **TOL)
    half = [rand(B, S, 8, dtype=np.float16), rand(8, 3 * D, dtype=np.float16), rand(3 * D, dtype=np.float16)]
    check("Attention", half, num_heads=N, **F16)


@pytest.mark.parametrize("past", [0, 2])
def test_attention_megatron_4d_mask_equals_its_3d_slice(past):
    """ORT's CPU kernel has no 4-D mask; its rows past..past+S and first T columns are the 3-D mask."""
    m4 = np.tril(np.ones((8, 8), np.int32))[None, None].repeat(B, 0)
    m4[1, 0, :, 1] = 0
    ins = [rand(B, S, 8), rand(8, 3 * D), rand(3 * D), None, rand(2, B, N, past, H)]
    ref = run_ort(one_node("Attention", ins[:3] + [m4[:, 0, past:past + S, :past + S]] + ins[4:], 2, num_heads=N),
                  ins[:3] + [m4[:, 0, past:past + S, :past + S]] + ins[4:])
    check_formula("Attention", ins[:3] + [m4] + ins[4:], ref, num_heads=N, **TOL)


def test_attention_rotary_is_a_clear_error():
    ins = [rand(B, S, 8), rand(8, 3 * D)]
    with pytest.raises(UnsupportedOpError, match=r"attention_node \(com.microsoft::Attention\): do_rotary"):
        run_ours(one_node("Attention", ins, num_heads=N, do_rotary=1), ins)
    with pytest.raises(UnsupportedOpError, match=r"attention_node .*needs attribute 'num_heads'"):
        run_ours(one_node("Attention", ins), ins)


# --- MultiHeadAttention ----------------------------------------------------------------------------------

def _qkv(s: int = S, kv: int = L, vd: int = D) -> list[np.ndarray]:
    return [rand(B, s, D), rand(B, kv, D), rand(B, kv, vd)]


KPM = {"1d": i32(3, 5), "2d": i32([1, 1, 1, 0, 0], [1, 0, 1, 1, 1]), "3d": _mask3(B, S, L),
       "3b+2": i32(3, 5, 0, 0, 0, 0, 0, 0)}


@pytest.mark.parametrize("mask", [None] + sorted(KPM))
@pytest.mark.parametrize("with_bias", [False, True])
def test_mha_cross_attention_masks(mask, with_bias):
    ins = _qkv() + [rand(3 * D) if with_bias else None, None if mask is None else KPM[mask]]
    check("MultiHeadAttention", ins, num_heads=N, **TOL)


@pytest.mark.parametrize("case", ["bnsh_kv", "bnsh_kv_bias", "v_head_size", "attention_bias", "bias_and_mask",
                                  "unidirectional_self", "unidirectional_cross", "filter"])
def test_mha_forms(case):
    q, k, v = _qkv()
    ins: list = {
        "bnsh_kv": [q, rand(B, N, L, H), rand(B, N, L, H)],
        "bnsh_kv_bias": [q, rand(B, N, L, H), rand(B, N, L, H), rand(3 * D)],
        "v_head_size": [q, k, rand(B, L, 6), rand(2 * D + 6)],
        "attention_bias": [q, k, v, None, None, rand(1, N, S, L)],
        "bias_and_mask": [q, k, v, rand(3 * D), i32(3, 5), rand(B, 1, S, L)],
        "unidirectional_self": [q, q, q],
        "unidirectional_cross": [q, k, v],
        "filter": [q, k, v, None, KPM["2d"]],
    }[case]
    attrs = {"unidirectional": 1} if case.startswith("unidirectional") else {}
    attrs.update({"mask_filter_value": -5.0, "scale": 0.25} if case == "filter" else {})
    check("MultiHeadAttention", ins, num_heads=N, **attrs, **TOL)


@pytest.mark.parametrize("mask", [None, i32(7, 6), i32([1] * 7, [0] + [1] * 5 + [0])])
@pytest.mark.parametrize("unidirectional", [0, 1])
@pytest.mark.parametrize("s", [S, 1])
def test_mha_kv_cache(mask, unidirectional, s):
    q = rand(B, s, D)
    past = 3 if s == S else 6
    ins = [q, rand(B, s, D), rand(B, s, D), rand(3 * D), mask if s == S else None, None,
           rand(B, N, past, H), rand(B, N, past, H)]
    check("MultiHeadAttention", ins, 3, num_heads=N, unidirectional=unidirectional, **TOL)


def test_mha_present_without_past_qk_output_and_half():
    q, k, v = _qkv()
    check("MultiHeadAttention", [q, k, v], 3, num_heads=N, **TOL)
    check("MultiHeadAttention", [q, k, v, None, None, rand(1, N, S, L)], outputs=["o", "", "", "qk"],
          out_dtype=np.float32, num_heads=N, scale=0.2, **TOL)
    check("MultiHeadAttention", [t.astype(np.float16) for t in (q, k, v)], num_heads=N, **F16)


@pytest.mark.parametrize("with_bias", [False, True])
def test_mha_packed_kv_and_packed_qkv_equal_unpacked(with_bias):
    """ORT's CPU kernel has no packed forms: the oracle is ORT on the same data unpacked."""
    bias = rand(3 * D) if with_bias else None
    q, kv = rand(B, S, D), rand(B, L, N, 2, H)
    k, v = (np.ascontiguousarray(kv[:, :, :, i].reshape(B, L, D)) for i in range(2))
    ref = run_ort(one_node("MultiHeadAttention", [q, k, v, bias], num_heads=N), [q, k, v, bias])
    check_formula("MultiHeadAttention", [q, kv, None, bias], ref, num_heads=N, **TOL)
    qkv = rand(B, S, N, 3, H)
    q, k, v = (np.ascontiguousarray(qkv[:, :, :, i].reshape(B, S, D)) for i in range(3))
    ref = run_ort(one_node("MultiHeadAttention", [q, k, v, bias], num_heads=N), [q, k, v, bias])
    check_formula("MultiHeadAttention", [qkv, None, None, bias], ref, num_heads=N, **TOL)


# --- RotaryEmbedding -------------------------------------------------------------------------------------

def _caches(head: int, rows: int = 32, dtype=np.float32) -> tuple[np.ndarray, np.ndarray]:
    ang = np.arange(rows)[:, None] * (1.0 / 10000 ** (np.arange(0, head, 2) / head))[None]
    return np.cos(ang).astype(dtype), np.sin(ang).astype(dtype)


@pytest.mark.parametrize("interleaved", [0, 1])
@pytest.mark.parametrize("layout", ["bsd", "bnsh"])
@pytest.mark.parametrize("positions,attrs", [("batch", {}), ("offset", {}), ("batch", {"num_heads": 2}),
                                             ("batch", {"num_heads": 2, "rotary_embedding_dim": 4})])
def test_rotary_embedding(interleaved, layout, positions, attrs):
    x = rand(2, 3, 16) if layout == "bsd" else rand(2, 2, 3, 8)
    pos = np.array([[0, 1, 2], [5, 6, 7]], np.int64) if positions == "batch" else np.array([4], np.int64)
    cos, sin = _caches(attrs.get("rotary_embedding_dim", 8))
    check("RotaryEmbedding", [x, pos, cos, sin], interleaved=interleaved, **attrs)


def test_rotary_embedding_half_and_out_of_cache_position():
    cos, sin = _caches(8, dtype=np.float16)
    pos = np.array([[0, 1, 2], [5, 6, 7]], np.int64)
    check("RotaryEmbedding", [rand(2, 3, 16, dtype=np.float16), pos, cos, sin], **F16)
    ins = [rand(2, 3, 16), np.array([30], np.int64), *_caches(8)]
    with pytest.raises(UnsupportedOpError, match=r"rotaryembedding_node .*positions up to 32 outside"):
        run_ours(one_node("RotaryEmbedding", ins), ins)


# --- GroupQueryAttention ---------------------------------------------------------------------------------

NQ, NKV, HG = 4, 2, 16


def _gqa(s: int, packed: bool = False, dtype=np.float32) -> list:
    if packed:
        return [rand(B, s, (NQ + 2 * NKV) * HG, dtype=dtype), None, None]
    return [rand(B, s, NQ * HG, dtype=dtype), rand(B, s, NKV * HG, dtype=dtype), rand(B, s, NKV * HG, dtype=dtype)]


def _past(p: int, dtype=np.float32) -> list:
    return [rand(B, NKV, p, HG, dtype=dtype), rand(B, NKV, p, HG, dtype=dtype)]


def check_gqa(ins: list, outputs: int = 3, valid_rows: list[int] | None = None, tol: dict | None = None,
              **attrs) -> None:
    """Like ``check``; where a prompt is right-padded only its valid query rows are compared
    (the op leaves the others unspecified)."""
    model = one_node("GroupQueryAttention", ins, outputs, num_heads=NQ, kv_num_heads=NKV,
                     out_dtype=np.float32 if outputs == 4 else None, **attrs)
    tol = tol or {"rtol": 1e-4, "atol": 1e-4}
    for i, (o, r) in enumerate(zip(run_ours(model, ins), run_ort(model, ins))):
        assert o.shape == r.shape and o.dtype == r.dtype, (i, o.shape, r.shape, o.dtype, r.dtype)
        rows = valid_rows if i == 0 and valid_rows else [o.shape[1]] * o.shape[0]
        for b, n in enumerate(rows):
            np.testing.assert_allclose(o[b, :n].astype(np.float64), r[b, :n].astype(np.float64), **tol,
                                       err_msg=f"output {i}, batch {b}")


@pytest.mark.parametrize("packed", [False, True])
@pytest.mark.parametrize("case", ["prompt", "prompt_empty_past", "decode", "decode_bigger_buffer",
                                  "decode_ragged", "continued_prompt"])
def test_gqa_kv_cache_paths(case, packed):
    ins = {
        "prompt": lambda: _gqa(S, packed) + [None, None, i32(3, 3), i32(4)],
        "prompt_empty_past": lambda: _gqa(S, packed) + _past(0) + [i32(3, 3), i32(4)],
        "decode": lambda: _gqa(1, packed) + _past(6) + [i32(6, 4), i32(7)],
        "decode_bigger_buffer": lambda: _gqa(1, packed) + _past(10) + [i32(6, 4), i32(7)],
        "decode_ragged": lambda: _gqa(1, packed) + _past(6) + [i32(5, 2), i32(6)],
        "continued_prompt": lambda: [x[:1] if x is not None else None for x in _gqa(S, packed) + _past(6)]
        + [i32(9), i32(10)],
    }[case]()
    check_gqa(ins)


def test_gqa_right_padded_prompt():
    check_gqa(_gqa(S) + [None, None, i32(3, 1), i32(4)])


@pytest.mark.parametrize("attrs", [{"local_window_size": 2}, {"softcap": 2.0}, {"smooth_softmax": 1},
                                   {"scale": 0.3}, {"causal": 0}, {"softcap": 3.0, "smooth_softmax": 1}])
@pytest.mark.parametrize("decode", [False, True])
def test_gqa_attributes(attrs, decode):
    ins = _gqa(1) + _past(6) + [i32(6, 4), i32(7)] if decode else _gqa(S) + [None, None, i32(3, 2), i32(4)]
    if decode and attrs.get("causal") == 0:
        pytest.skip("causal=0 is for encoders: no cache")
    check_gqa(ins, valid_rows=None if decode else [4, 3], **attrs)


@pytest.mark.parametrize("decode", [False, True])
@pytest.mark.parametrize("interleaved", [0, 1])
@pytest.mark.parametrize("packed", [False, True])
def test_gqa_rotary(decode, interleaved, packed):
    cos, sin = _caches(HG)
    ins = (_gqa(1, packed) + _past(6) + [i32(6, 4), i32(7)]) if decode else (_gqa(S, packed) + [None, None,
                                                                                                 i32(3, 3), i32(4)])
    check_gqa(ins + [cos, sin], do_rotary=1, rotary_interleaved=interleaved)


def test_gqa_rotary_position_ids_and_partial_rotation():
    cos, sin = _caches(HG)
    check_gqa(_gqa(S) + [None, None, i32(3, 3), i32(4), cos, sin, np.array([[3, 4, 5, 6], [2, 3, 4, 5]])],
              do_rotary=1)
    check_gqa(_gqa(1) + _past(6) + [i32(6, 4), i32(7), cos, sin, np.array([[9], [2]])], do_rotary=1)
    big = [rand(B, S, NQ * 32), rand(B, S, NKV * 32), rand(B, S, NKV * 32), None, None, i32(3, 3), i32(4)]
    c32, s32 = _caches(32)
    model = one_node("GroupQueryAttention", big + [c32[:, :8], s32[:, :8]], 3, num_heads=NQ, kv_num_heads=NKV,
                     do_rotary=1)
    for o, r in zip(run_ours(model, big + [c32[:, :8], s32[:, :8]]), run_ort(model, big + [c32[:, :8], s32[:, :8]])):
        np.testing.assert_allclose(o, r, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("decode", [False, True])
def test_gqa_attention_bias_head_sink_and_qk_output(decode):
    t = 7 if decode else 4
    base = _gqa(1) + _past(6) + [i32(6, 4), i32(7)] if decode else _gqa(S) + [None, None, i32(3, 3), i32(4)]
    s = 1 if decode else S
    check_gqa(base + [None, None, None, rand(B, 1, s, t)], softcap=1.0)
    check_gqa(base + [None, None, None, None, rand(NQ)])
    for mode in (1, 2):
        check_gqa(base, 4, qk_output=mode)


def test_gqa_half():
    cos, sin = _caches(HG, dtype=np.float16)
    check_gqa(_gqa(S, dtype=np.float16) + [None, None, i32(3, 3), i32(4)], tol=F16)
    check_gqa(_gqa(1, dtype=np.float16) + _past(6, np.float16) + [i32(6, 4), i32(7), cos, sin], tol=F16,
              do_rotary=1)


def test_gqa_unsupported_inputs_are_clear_errors():
    ins = _gqa(S) + [None, None, i32(3, 3), i32(4)]
    with pytest.raises(UnsupportedOpError, match=r"groupqueryattention_node .*do_rotary needs cos_cache"):
        run_ours(one_node("GroupQueryAttention", ins, 3, num_heads=NQ, kv_num_heads=NKV, do_rotary=1), ins)
    with pytest.raises(UnsupportedOpError, match=r"groupqueryattention_node .*not a multiple of kv_num_heads"):
        run_ours(one_node("GroupQueryAttention", ins, 3, num_heads=NQ, kv_num_heads=3), ins)
    decode = _gqa(1) + [None, None, i32(6, 4), i32(7)]
    with pytest.raises(UnsupportedOpError, match=r"groupqueryattention_node .*past lengths \[6, 4\], outside the 0"):
        run_ours(one_node("GroupQueryAttention", decode, 3, num_heads=NQ, kv_num_heads=NKV), decode)


# --- cost ------------------------------------------------------------------------------------------------

def _task(op: str, ins: list, **attrs):
    session = gx.Session(gx.load(one_node(op, ins, **attrs)))
    compiled = session.compile(feeds_of_model(ins))
    (task,) = [t for t in compiled.tasks.tasks if t.op == op]
    return task


def feeds_of_model(ins: list) -> dict:
    return {f"in{i}": x for i, x in enumerate(ins) if x is not None}


def test_attention_cost_counts_projection_and_both_products_on_the_cube():
    b, s, din, n, h, p = 2, 8, 32, 4, 8, 3
    task = _task("Attention", [rand(b, s, din), rand(din, 3 * n * h), rand(3 * n * h), None,
                               rand(2, b, n, p, h)], num_heads=n)
    t = p + s
    assert task.unit == "cube"
    assert task.flops == 2 * b * s * din * 3 * n * h + 2 * b * n * s * t * 2 * h + 5 * b * n * s * t


@pytest.mark.parametrize("op,ins,attrs,flops", [
    ("MultiHeadAttention", [rand(2, 4, 8), rand(2, 5, 8), rand(2, 5, 8)], {"num_heads": 2},
     2 * 2 * 2 * 4 * 5 * (4 + 4) + 5 * 2 * 2 * 4 * 5),
    ("GroupQueryAttention", [rand(1, 1, 64), rand(1, 1, 32), rand(1, 1, 32), rand(1, 2, 6, 16), rand(1, 2, 6, 16),
                             i32(6), i32(7)], {"num_heads": 4, "kv_num_heads": 2},
     2 * 4 * 1 * 7 * 32 + 5 * 4 * 7),
    ("FusedMatMul", [rand(2, 3, 5, 4), rand(2, 3, 6, 5)], {"transA": 1, "transB": 1}, 2 * 6 * 4 * 6 * 5),
    ("FusedGemm", [rand(4, 3), rand(4, 5)], {"transA": 1, "activation": "Relu"}, 2 * 3 * 5 * 4),
    ("FusedConv", [rand(1, 3, 6, 6), rand(4, 3, 3, 3)], {"pads": [1, 1, 1, 1]}, 2 * 36 * 4 * 27),
])
def test_fused_cube_op_costs(op, ins, attrs, flops):
    task = _task(op, ins, **attrs)
    assert (task.unit, task.flops) == ("cube", flops)
    assert task.block_dim >= 1


def test_contrib_vector_ops_keep_the_vector_rule():
    assert _task("FastGelu", [rand(2, 3, 16)]).unit == "vector"
