"""ONNX Runtime's GroupQueryAttention (com.microsoft): the decoder attention of LLaMA-style
models, with N query heads sharing K key/value heads and a BNSH KV cache.

Per batch entry b the cache holds T_b = seqlens_k[b] + 1 tokens after the step; the new S
tokens go at rows P_b = T_b - S (0 on the first prompt, when S equals
total_sequence_length) of the present buffer, which is max(total_sequence_length, past
buffer) long and zero elsewhere. Query s sits at position P_b + s: it sees keys up to its
own position (causal), the last local_window_size + 1 of them when a window is set.
"""

from __future__ import annotations

import math

import numpy as np

from graphexec.kernels.contrib_attention import merge_heads, num_heads, split_heads
from graphexec.kernels.contrib_rotary import cache_rows, rotate
from graphexec.kernels.contrib_util import DOMAIN, attr_check, flag, ints, refuse, work
from graphexec.kernels.registry import OpContext, register

# inputs past index 10 (head_sink) are quantized caches, per-head Q/K norms and padded chunks
_REFUSED_INPUTS = {12: "k_scale", 13: "v_scale", 14: "q_norm_weight", 15: "k_norm_weight", 16: "query_seqlens"}


def _split_qkv(ctx: OpContext, query: np.ndarray, key: np.ndarray | None, value: np.ndarray | None,
               heads: int, kv_heads: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(q, k, v) as (B, N|K, S, H) from separate inputs or one packed (B, S, (N + 2K) * H) query."""
    qw, kw, vw = work(ctx, query, key, value)
    if query.ndim != 3:
        refuse(ctx, f"query of shape {query.shape}; expected (B, S, D)")
    if key is None and value is None:
        d = query.shape[2]
        if d % (heads + 2 * kv_heads):
            refuse(ctx, f"packed query of width {d} does not split into {heads} + 2 x {kv_heads} heads")
        hd = d // (heads + 2 * kv_heads)
        qw, kw, vw = np.split(qw, [heads * hd, (heads + kv_heads) * hd], axis=-1)
    elif key is None or value is None or key.shape != value.shape or key.shape[:2] != query.shape[:2]:
        refuse(ctx, "key and value must both be (B, S, kv_num_heads * H) like the query, or both be omitted")
    if qw.shape[2] % heads or kw.shape[2] % kv_heads or qw.shape[2] // heads != kw.shape[2] // kv_heads:
        refuse(ctx, f"query {qw.shape} and key {kw.shape} do not split into {heads} and {kv_heads} equal heads")
    return split_heads(qw, heads), split_heads(kw, kv_heads), split_heads(vw, kv_heads)


def _positions(ctx: OpContext, past_lens: np.ndarray, s: int, position_ids: np.ndarray | None,
               first: bool) -> np.ndarray:
    """The rotary position of each new token; a first prompt reads only position_ids[0, 0] (its offset)."""
    b = past_lens.shape[0]
    if position_ids is None:
        return past_lens[:, None] + np.arange(s)[None]
    pos = ints(ctx, position_ids, "position_ids")
    if pos.shape != (b, s):
        refuse(ctx, f"position_ids of shape {position_ids.shape}; expected ({b}, {s})")
    return np.broadcast_to(pos[:1, :1] + np.arange(s)[None], (b, s)) if first else pos


def _rotary(ctx: OpContext, q: np.ndarray, k: np.ndarray, pos: np.ndarray, cos: np.ndarray | None,
            sin: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    if cos is None or sin is None or cos.shape != sin.shape or cos.ndim != 2 or 2 * cos.shape[1] > q.shape[3]:
        refuse(ctx, "do_rotary needs cos_cache and sin_cache of shape (max_positions, R/2), R <= head size")
    cw, sw = work(ctx, cos, sin)
    c, s = cache_rows(ctx, cw, pos)[:, None], cache_rows(ctx, sw, pos)[:, None]  # (B, 1, S, R/2)
    inter = flag(ctx, "rotary_interleaved")
    return rotate(q, c, s, inter), rotate(k, c, s, inter)


def _present(past: np.ndarray | None, new: np.ndarray, past_lens: np.ndarray, length: int) -> np.ndarray:
    """The (B, K, length, H) cache: each entry's first P_b past rows, then its new rows."""
    b, kh, s, hd = new.shape
    out = np.zeros((b, kh, length, hd), dtype=new.dtype)
    for i, p in enumerate(past_lens):
        if past is not None and p:
            out[i, :, :p] = past[i, :, :p]
        out[i, :, p:p + s] = new[i, :, :length - p]
    return out


def _visible(ctx: OpContext, past_lens: np.ndarray, totals: np.ndarray, s: int, length: int) -> np.ndarray:
    """(B, 1, S, length) True where a query sees a key: causal and in the local window, or
    (causal=0) every key the entry holds."""
    keys = np.arange(length)[None, None, :]
    if not flag(ctx, "causal", 1):
        if int(ctx.attrs.get("local_window_size", -1)) > 0:
            refuse(ctx, "local_window_size needs causal=1")
        return np.broadcast_to((keys < totals[:, None, None])[:, None], (len(totals), 1, s, length))
    pos = past_lens[:, None, None] + np.arange(s)[None, :, None]
    seen = (keys <= pos) & (keys < totals[:, None, None])
    window = int(ctx.attrs.get("local_window_size", -1))
    if window > 0:
        seen &= keys > pos - window
    return seen[:, None]


def _softmax(ctx: OpContext, scores: np.ndarray, seen: np.ndarray, sink: np.ndarray | None) -> np.ndarray:
    """softmax over the visible keys; a sink logit (head_sink, or 0 with smooth_softmax) joins the
    denominator, so a head may attend to nothing."""
    x = np.where(seen, scores, -np.inf)
    m = x.max(axis=-1, keepdims=True)
    if sink is not None:
        m = np.maximum(m, sink)
    e = np.where(seen, np.exp(x - m), 0)
    den = e.sum(axis=-1, keepdims=True) + (0 if sink is None else np.exp(sink - m))
    return e / den


def _gqa_attrs(ctx: OpContext) -> tuple[int, int]:
    """GroupQueryAttention's attribute refusals (also its compile-time check); the head counts."""
    heads, kv_heads = num_heads(ctx), num_heads(ctx, "kv_num_heads")
    if heads % kv_heads:
        refuse(ctx, f"num_heads {heads} is not a multiple of kv_num_heads {kv_heads}")
    quantized = any(str(ctx.attrs.get(k, "NONE")) != "NONE" for k in ("k_quant_type", "v_quant_type"))
    if flag(ctx, "sliding_window_cache") or quantized:
        refuse(ctx, "sliding_window_cache and quantized KV caches are not supported")
    if not flag(ctx, "causal", 1) and int(ctx.attrs.get("local_window_size", -1)) > 0:
        refuse(ctx, "local_window_size needs causal=1")
    flag(ctx, "do_rotary")
    flag(ctx, "rotary_interleaved")
    if ctx.num_outputs > 3 and int(ctx.attrs.get("qk_output", 0)) not in (1, 2):
        refuse(ctx, "output_qk needs qk_output=1 (scores) or 2 (probabilities)")
    return heads, kv_heads


@register("GroupQueryAttention", domain=DOMAIN, check=attr_check(_gqa_attrs))
def group_query_attention(ctx: OpContext, query: np.ndarray, key: np.ndarray | None, value: np.ndarray | None,
                          past_key: np.ndarray | None, past_value: np.ndarray | None, seqlens_k: np.ndarray,
                          total_seq: np.ndarray, cos_cache: np.ndarray | None = None,
                          sin_cache: np.ndarray | None = None, position_ids: np.ndarray | None = None,
                          attn_bias: np.ndarray | None = None, head_sink: np.ndarray | None = None,
                          *rest: np.ndarray | None):
    """Grouped-query self attention with a KV cache: output, present_key, present_value (and output_qk)."""
    heads, kv_heads = _gqa_attrs(ctx)
    for i, x in enumerate(rest, start=12):
        if x is not None:
            refuse(ctx, f"input {_REFUSED_INPUTS.get(i, i)} is not supported (quantized caches, Q/K norms "
                        "and padded chunks are not)")
    q, k, v = _split_qkv(ctx, query, key, value, heads, kv_heads)
    b, _, s, hd = q.shape
    totals = ints(ctx, seqlens_k, "seqlens_k").reshape(-1) + 1
    total = int(np.asarray(total_seq).reshape(-1)[0])
    if totals.shape != (b,) or totals.max() > total:
        refuse(ctx, f"seqlens_k {seqlens_k.tolist()} does not fit batch {b} and total_sequence_length {total}")
    past_lens = np.zeros(b, np.int64) if s == total else totals - s
    if (past_key is None) != (past_value is None):
        refuse(ctx, "past_key and past_value must be given together")
    buffer = 0 if past_key is None else past_key.shape[2]
    if past_lens.min() < 0 or past_lens.max() > buffer:
        refuse(ctx, f"seqlens_k {seqlens_k.tolist()} mean past lengths {past_lens.tolist()}, outside the "
                    f"{buffer} rows of the past buffer")
    if flag(ctx, "do_rotary"):
        q, k = _rotary(ctx, q, k, _positions(ctx, past_lens, s, position_ids, s == total), cos_cache, sin_cache)
    pk, pv = work(ctx, past_key, past_value)
    length = max(total, buffer)
    k_all, v_all = _present(pk, k, past_lens, length), _present(pv, v, past_lens, length)
    group = heads // kv_heads
    scale = float(ctx.attrs.get("scale", 0.0)) or 1 / math.sqrt(hd)
    scores = np.matmul(q, np.repeat(k_all, group, axis=1).swapaxes(-1, -2)) * q.dtype.type(scale)
    softcap = float(ctx.attrs.get("softcap", 0.0))
    if softcap > 0:
        scores = softcap * np.tanh(scores / softcap)
    if attn_bias is not None:
        scores[..., :total] += work(ctx, attn_bias)[0]
    sink = None if head_sink is None else work(ctx, head_sink)[0].reshape(1, heads, 1, 1)
    if sink is None and int(ctx.attrs.get("smooth_softmax", -1)) == 1:
        sink = np.zeros((1, 1, 1, 1), dtype=scores.dtype)
    seen = _visible(ctx, past_lens, totals, s, length)
    probs = _softmax(ctx, scores, seen, sink)
    y = merge_heads(np.matmul(probs, np.repeat(v_all, group, axis=1))).astype(query.dtype)
    outs = [y, k_all.astype(query.dtype), v_all.astype(query.dtype)]
    if ctx.num_outputs > 3:
        qk = {1: np.where(seen, scores, 0), 2: probs}.get(int(ctx.attrs.get("qk_output", 0)))
        if qk is None:
            refuse(ctx, "output_qk needs qk_output=1 (scores) or 2 (probabilities)")
        outs.append(qk[..., :total].astype(query.dtype))
    return tuple(outs[:ctx.num_outputs])
