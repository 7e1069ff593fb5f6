"""ONNX Runtime's fused attention: Attention (packed QKV projection, BERT/GPT-2) and
MultiHeadAttention (separate or packed Q/K/V, cross attention, KV cache).

Both come down to ``attend``: softmax(scale * Q K^T + bias) V per head, where the bias
merges the padding mask, the causal mask and attention_bias. Padded keys get
``mask_filter_value`` (-10000) added, as onnxruntime does, not -inf: a row whose keys
are all padded then averages them instead of giving NaN.
"""

from __future__ import annotations

import math

import numpy as np

from graphexec.kernels.contrib_util import DOMAIN, attr_check, flag, need, refuse, work
from graphexec.kernels.nn import _row_max
from graphexec.kernels.registry import OpContext, register


def split_heads(x: np.ndarray, heads: int) -> np.ndarray:
    """(B, S, N*H) -> (B, N, S, H)."""
    b, s, d = x.shape
    return x.reshape(b, s, heads, d // heads).transpose(0, 2, 1, 3)


def merge_heads(x: np.ndarray) -> np.ndarray:
    """(B, N, S, H) -> (B, S, N*H)."""
    b, n, s, h = x.shape
    return x.transpose(0, 2, 1, 3).reshape(b, s, n * h)


def _softmax_(x: np.ndarray) -> np.ndarray:
    """softmax over the last axis, in place: shift by the row max, exp, divide by the row sum."""
    x -= _row_max(x, x.ndim - 1)
    np.exp(x, out=x)
    x /= x.sum(axis=-1, keepdims=True)
    return x


def attend(q: np.ndarray, k: np.ndarray, v: np.ndarray, bias: np.ndarray | None,
           scale: float, keep_scores: bool = False) -> tuple[np.ndarray, np.ndarray | None]:
    """(softmax(scale * q k^T + bias) v as (B, S, N, H), the scaled and biased scores when
    ``keep_scores``) for q (B, N, S, H), k/v (B, N, T, H). The scores live in one array from
    the first GEMM to the second (scaled, biased and normalized in place), and the second
    GEMM writes its heads straight into the merged (B, S, N, H) layout."""
    scores = np.matmul(q, k.swapaxes(-1, -2))
    scores *= q.dtype.type(scale)
    if bias is not None:
        if np.broadcast_shapes(scores.shape, bias.shape) == scores.shape:
            scores += bias
        else:
            scores = scores + bias
    kept = scores.copy() if keep_scores else None
    probs = _softmax_(scores)
    b, n, s, _ = probs.shape
    out = np.empty((b, s, n, v.shape[-1]), dtype=np.result_type(probs, v))
    np.matmul(probs, v, out=out.transpose(0, 2, 1, 3))
    return out, kept


def merge_heads_bsnh(x: np.ndarray) -> np.ndarray:
    """attend's (B, S, N, H) output -> (B, S, N*H), a view."""
    b, s, n, h = x.shape
    return x.reshape(b, s, n * h)


def causal(s: int, t: int, past: int) -> np.ndarray:
    """(S, T) True where query s may see key t: the keys up to its own position past + s."""
    return np.arange(t)[None, :] <= past + np.arange(s)[:, None]


def padding_mask(ctx: OpContext, mask: np.ndarray, b: int, s: int, t: int, past: int) -> np.ndarray:
    """The (B, S, T) keep-mask of ORT's mask_index forms.

    1-D (B) or (3B+2): each row's key length (right padding); (2B): end then start positions
    (left padding); (B, T): 1 keeps a key; (B, S, T): per query; (B, 1, M, M): Megatron's mask,
    of which rows past..past+S and the first T columns apply.
    """
    m = mask.astype(np.int64)
    keys = np.arange(t)
    if m.ndim == 1 and m.shape[0] in (b, 2 * b, 3 * b + 2):
        keep = keys[None, :] < m[:b, None]
        if m.shape[0] == 2 * b:
            keep &= keys[None, :] >= m[b:, None]
        return np.broadcast_to(keep[:, None, :], (b, s, t))
    if m.ndim == 2 and m.shape[1] == 1 and m.shape[0] in (1, b):  # ORT's dummy mask: keeps every key
        return np.ones((b, s, t), dtype=bool)
    if m.ndim == 2 and m.shape == (b, t):
        return np.broadcast_to((m != 0)[:, None, :], (b, s, t))
    if m.ndim == 3 and m.shape == (b, s, t):
        return m != 0
    if m.ndim == 4 and m.shape[:2] == (b, 1) and m.shape[2] == m.shape[3] >= past + s and m.shape[3] >= t:
        return m[:, 0, past:past + s, :t] != 0
    refuse(ctx, f"mask of shape {mask.shape} for batch {b}, sequence {s}, total sequence {t}")


def score_bias(ctx: OpContext, mask: np.ndarray | None, attn_bias: np.ndarray | None, unidirectional: bool,
               shape: tuple[int, int, int, int], past: int, dtype: np.dtype) -> np.ndarray | None:
    """The additive (B or 1, 1 or N, S, T) bias: mask_filter_value where padded, -inf where in the
    future (unidirectional), plus attention_bias."""
    b, n, s, t = shape
    fill = dtype.type(ctx.attrs.get("mask_filter_value", -10000.0))
    zero = dtype.type(0)
    bias = None if mask is None else np.where(padding_mask(ctx, mask, b, s, t, past), zero, fill)[:, None]
    if unidirectional and s > 1:
        # future keys drop out of the softmax, so a fully padded row averages its past keys; as in
        # ORT's CPU kernel the last query sees every key (the same thing unless T > past + S)
        seen = causal(s, t, past)
        seen[-1] = True
        future = np.where(seen, zero, dtype.type(-np.inf))
        bias = future[None, None] if bias is None else bias + future
    if attn_bias is not None:
        if attn_bias.ndim != 4 or attn_bias.shape[2:] != (s, t) or attn_bias.shape[0] not in (1, b) \
                or attn_bias.shape[1] not in (1, n):
            refuse(ctx, f"attention_bias of shape {attn_bias.shape}; expected (B or 1, N or 1, {s}, {t})")
        ab = work(ctx, attn_bias)[0]
        bias = ab if bias is None else bias + ab
    return bias


def _scale(ctx: OpContext, head_size: int) -> float:
    scale = float(ctx.attrs.get("scale", 0.0))
    return scale if scale != 0.0 else 1 / math.sqrt(head_size)


def num_heads(ctx: OpContext, key: str = "num_heads") -> int:
    """A required head count, at least 1."""
    heads = int(need(ctx, key))
    if heads < 1:
        refuse(ctx, f"{key}={heads}; expected at least 1")
    return heads


def _attention_attrs(ctx: OpContext) -> int:
    """Attention's attribute refusals (also its compile-time check); the head count."""
    heads = num_heads(ctx)
    if flag(ctx, "do_rotary") or flag(ctx, "past_present_share_buffer"):
        refuse(ctx, "do_rotary and past_present_share_buffer are not supported (as in onnxruntime's CPU "
                    "kernel); fuse the model with MultiHeadAttention + RotaryEmbedding")
    flag(ctx, "unidirectional")
    sizes = [int(v) for v in ctx.attrs.get("qkv_hidden_sizes", [])]
    if sizes and (len(sizes) != 3 or sizes[0] != sizes[1] or any(v % heads for v in sizes)):
        refuse(ctx, f"qkv_hidden_sizes {sizes} are not three sizes (Q and K equal) that split over {heads} heads")
    return heads


def _mha_attrs(ctx: OpContext) -> int:
    heads = num_heads(ctx)
    flag(ctx, "unidirectional")
    return heads


def _qkv_sizes(ctx: OpContext, weights: np.ndarray, heads: int) -> tuple[int, int, int]:
    sizes = [int(v) for v in ctx.attrs.get("qkv_hidden_sizes", [])] or [weights.shape[1] // 3] * 3
    if len(sizes) != 3 or sizes[0] != sizes[1] or sum(sizes) != weights.shape[1] or any(v % heads for v in sizes):
        refuse(ctx, f"qkv_hidden_sizes {sizes} do not split weights {weights.shape} over {heads} heads")
    return sizes[0], sizes[1], sizes[2]


@register("Attention", domain=DOMAIN, check=attr_check(_attention_attrs))
def attention(ctx: OpContext, x: np.ndarray, weights: np.ndarray, bias: np.ndarray | None = None,
              mask_index: np.ndarray | None = None, past: np.ndarray | None = None,
              attn_bias: np.ndarray | None = None, past_len: np.ndarray | None = None):
    """Self attention with the Q/K/V projection fused in: x @ [Wq Wk Wv] + bias, then per-head
    attention; ``past`` (2, B, N, P, H) is prepended to K/V and ``present`` returns the result."""
    heads = _attention_attrs(ctx)
    if x.ndim != 3 or weights.ndim != 2 or weights.shape[0] != x.shape[2]:
        refuse(ctx, f"input {x.shape} and weights {weights.shape}; expected (B, S, D_in) and (D_in, D_qkv)")
    dq, dk, dv = _qkv_sizes(ctx, weights, heads)
    xw, ww, bw = work(ctx, x, weights, bias)
    proj = xw @ ww
    if bw is not None:
        proj += bw
    q, k, v = (split_heads(p, heads) for p in np.split(proj, [dq, dq + dk], axis=-1))
    b, s = x.shape[:2]
    p = 0
    if past is not None:
        if past.shape != (2, b, heads, past.shape[3], dk // heads) or dk != dv:
            refuse(ctx, f"past of shape {past.shape}; expected (2, {b}, {heads}, P, {dk // heads})")
        pw = work(ctx, past)[0]
        p = past.shape[3]
        k, v = np.concatenate([pw[0], k], axis=2), np.concatenate([pw[1], v], axis=2)
    sb = score_bias(ctx, mask_index, attn_bias, flag(ctx, "unidirectional"), (b, heads, s, p + s), p, q.dtype)
    out, _ = attend(q, k, v, sb, _scale(ctx, dq // heads))
    y = merge_heads_bsnh(out).astype(x.dtype, copy=False)
    return (y, np.stack([k, v]).astype(x.dtype)) if ctx.num_outputs > 1 else y


def _mha_inputs(ctx: OpContext, query: np.ndarray, key: np.ndarray | None, value: np.ndarray | None,
                bias: np.ndarray | None, heads: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """q, k, v as (B, N, S|L, H) from MHA's input forms; the bias applies to 3-D and packed ones."""
    qw, kw, vw, bw = work(ctx, query, key, value, bias)
    if query.ndim == 5:  # packed QKV (B, S, N, 3, H)
        if key is not None or query.shape[2:4] != (heads, 3):
            refuse(ctx, f"query of shape {query.shape} is packed QKV (B, S, {heads}, 3, H) only without key/value")
        hd = query.shape[4]
        qw = qw + bw.reshape(3, heads, hd).transpose(1, 0, 2) if bw is not None else qw
        return tuple(qw[:, :, :, i].transpose(0, 2, 1, 3) for i in range(3))  # type: ignore[return-value]
    if query.ndim != 3 or query.shape[2] % heads:
        refuse(ctx, f"query of shape {query.shape}; expected (B, S, N*H) or packed (B, S, N, 3, H)")
    d = query.shape[2]
    bq, bk, bv = (None, None, None) if bw is None else (bw[:d], bw[d:2 * d], bw[2 * d:])
    q = split_heads(qw if bq is None else qw + bq, heads)
    if key is not None and key.ndim == 5:  # packed KV (B, L, N, 2, H)
        if value is not None or key.shape[2:4] != (heads, 2):
            refuse(ctx, f"key of shape {key.shape} is packed KV (B, L, {heads}, 2, H) only without value")
        kv = kw if bw is None else kw + bw[d:].reshape(2, heads, -1).transpose(1, 0, 2)
        return q, kv[:, :, :, 0].transpose(0, 2, 1, 3), kv[:, :, :, 1].transpose(0, 2, 1, 3)
    if key is None or value is None or key.ndim != value.ndim or key.ndim not in (3, 4):
        refuse(ctx, "key and value must both be given, as (B, L, D) or (B, N, L, H)")
    if key.ndim == 4:  # already projected and split (cross attention's cached keys): no bias
        return q, kw, vw
    return q, split_heads(kw if bk is None else kw + bk, heads), split_heads(vw if bv is None else vw + bv, heads)


@register("MultiHeadAttention", domain=DOMAIN, check=attr_check(_mha_attrs))
def multi_head_attention(ctx: OpContext, query: np.ndarray, key: np.ndarray | None = None,
                         value: np.ndarray | None = None, bias: np.ndarray | None = None,
                         key_padding_mask: np.ndarray | None = None, attn_bias: np.ndarray | None = None,
                         past_key: np.ndarray | None = None, past_value: np.ndarray | None = None,
                         past_len: np.ndarray | None = None, cache_indirection: np.ndarray | None = None):
    """Attention over already-projected Q/K/V (self or cross), with an optional KV cache
    (past_key/past_value prepended; present_key/present_value returned, BNSH) and qk output."""
    heads = _mha_attrs(ctx)
    if past_len is not None or cache_indirection is not None:
        refuse(ctx, "past_sequence_length / cache_indirection (shared KV buffers, beam search) are not supported")
    q, k, v = _mha_inputs(ctx, query, key, value, bias, heads)
    p = 0
    if (past_key is None) != (past_value is None):
        refuse(ctx, "past_key and past_value must be given together")
    if past_key is not None and past_value is not None:
        pk, pv = work(ctx, past_key, past_value)
        if pk.ndim != 4 or pk.shape[:2] != k.shape[:2] or pk.shape[3] != k.shape[3] or pv.shape[:3] != pk.shape[:3]:
            refuse(ctx, f"past_key {past_key.shape} / past_value {past_value.shape} do not fit keys {k.shape}")
        p = pk.shape[2]
        k, v = np.concatenate([pk, k], axis=2), np.concatenate([pv, v], axis=2)
    b, _, s, hd = q.shape
    t = k.shape[2]
    sb = score_bias(ctx, key_padding_mask, attn_bias, flag(ctx, "unidirectional"), (b, heads, s, t), p, q.dtype)
    out, scores = attend(q, k, v, sb, _scale(ctx, hd), keep_scores=ctx.num_outputs > 3)
    dt = query.dtype
    outs = [merge_heads_bsnh(out).astype(dt), k.astype(dt), v.astype(dt)]
    if scores is not None:
        outs.append(scores.astype(dt))
    return tuple(outs[:ctx.num_outputs]) if ctx.num_outputs > 1 else outs[0]
