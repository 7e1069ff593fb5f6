"""Output types of onnxruntime's attention ops (com.microsoft Attention, MultiHeadAttention,
GroupQueryAttention), for contrib_shapes.py, which registers them; inputs come by position.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from graphexec.ir import TensorType
from graphexec.kernels.contrib_util import Shape, T, Types, like, safe_rule, static


def _heads(attrs: dict[str, Any], key: str = "num_heads") -> int:
    n = int(attrs[key])
    if n < 1:
        raise ValueError(f"{key} {n}")
    return n


def _split(d: int, n: int) -> int:
    """The head size of a hidden size ``d`` split over ``n`` heads."""
    if d % n:
        raise ValueError(f"{d} does not split over {n} heads")
    return d // n


@safe_rule
def attention(x: TensorType, w: TensorType, bias: T = None, mask: T = None, past: T = None, *rest: T,
              **attrs: Any) -> Types:
    """output (B, S, D_v), present (2, B, N, P + S, H)."""
    b, s, _ = static(x)
    n = _heads(attrs)
    d_all = static(w)[1]
    dq, dk, dv = [int(v) for v in attrs.get("qkv_hidden_sizes", [])] or [d_all // 3] * 3
    if dq != dk or dq + dk + dv != d_all or dv % n or dk % n:
        raise ValueError("qkv_hidden_sizes do not split the weights")
    out = like(x, (b, s, dv))
    if dk != dv:
        return [out, TensorType()]    # K and V do not stack into a present
    p = 0 if past is None else static(past)[3]
    return [out, like(x, (2, b, n, p + s, dk // n))]


def _mha_kv(q: Shape, key: T, value: T, n: int) -> tuple[Shape, Shape]:
    """K and V as (B, N, L, H) from MultiHeadAttention's input forms (after ``_mha_inputs``)."""
    if len(q) == 5:  # packed QKV (B, S, N, 3, H)
        kv = (q[0], q[2], q[1], q[4])
        return kv, kv
    k = static(key)
    if len(k) == 5:  # packed KV (B, L, N, 2, H)
        kv = (k[0], k[2], k[1], k[4])
        return kv, kv
    v = static(value)
    if len(k) == 4:  # already BNSH
        return k, v
    return (k[0], n, k[1], _split(k[2], n)), (v[0], n, v[1], _split(v[2], n))


@safe_rule
def multi_head_attention(query: TensorType, key: T = None, value: T = None, bias: T = None, kpm: T = None,
                         attn_bias: T = None, past_key: T = None, past_value: T = None, *rest: T,
                         **attrs: Any) -> Types:
    """output (B, S, N * H_v), present_key/value (B, N, P + L, H), qk (B, N, S, P + L)."""
    q = static(query)
    n = _heads(attrs)
    if len(q) not in (3, 5):
        raise ValueError("query rank")
    b, s = q[:2]
    h = q[4] if len(q) == 5 else _split(q[2], n)
    k, v = _mha_kv(q, key, value, n)
    if past_key is not None and past_value is not None:
        pk, pv = static(past_key), static(past_value)
        k, v = k[:2] + (pk[2] + k[2],) + k[3:], v[:2] + (pv[2] + v[2],) + v[3:]
    if k[3] != h:
        raise ValueError("key head size differs from the query's")
    heads = tuple(np.broadcast_shapes((b, n), k[:2], v[:2]))
    return [like(query, (b, s, heads[1] * v[3])), like(query, k), like(query, v),
            like(query, heads + (s, k[2]))]


@safe_rule
def group_query_attention(query: TensorType, key: T = None, value: T = None, past_key: T = None,
                          *rest: T, **attrs: Any) -> Types:
    """output (B, S, N * H); present_key/value (B, K, ?, H) and output_qk (B, N, S, ?): their
    length is total_sequence_length's value (or the past buffer's, if longer)."""
    b, s, d = static(query)
    n, kv = _heads(attrs), _heads(attrs, "kv_num_heads")
    h = _split(d, n + 2 * kv) if key is None else _split(d, n)
    present = TensorType(query.dtype, (b, kv, None, h))
    return [like(query, (b, s, n * h)), present, present, TensorType(query.dtype, (b, n, s, None))]
