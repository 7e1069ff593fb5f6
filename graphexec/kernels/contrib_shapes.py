"""Output types of the float com.microsoft ops, and of ORT's SimplifiedLayerNormalization
and pre-17 LayerNormalization in the ONNX domain: onnx's shape inference knows none of
them, so without these rules their outputs, and everything downstream, stay dynamic (no
planned memory, degraded costs).

Importing the module attaches each rule to its kernel's registry entry (the rules slot
shape inference reads, as for quant_shapes.py's ops). A rule gets every input by position,
None where an optional one is omitted, and follows what its kernel returns: unknown for
inputs the kernel refuses, an unknown dim for a runtime size (GroupQueryAttention's cache).
"""

from __future__ import annotations

from functools import wraps
from typing import Any, Callable

import numpy as np

from graphexec.ir import TensorType
from graphexec.kernels import (  # noqa: F401  (the kernels register before their rules)
    contrib_act,
    contrib_attention,
    contrib_gqa,
    contrib_matmul,
    contrib_norm,
    contrib_rotary,
    registry,
)
from graphexec.kernels.contrib_util import DOMAIN
from graphexec.kernels.conv import spatial_ints, window_geometry
from graphexec.kernels.custom import CustomKernel
from graphexec.kernels.registry import OpContext, Unsupported

T = TensorType | None
Shape = tuple[int, ...]
Types = TensorType | list[TensorType]
_F32 = np.dtype(np.float32)
_I32 = np.dtype(np.int32)


def _safe(rule: Callable[..., Types]) -> Callable[..., Types]:
    @wraps(rule)
    def safe(*ins: T, **attrs: Any) -> Types:
        try:
            return rule(*ins, **attrs)
        except (ValueError, IndexError, TypeError, KeyError, AttributeError, ZeroDivisionError, Unsupported):
            return TensorType()

    return safe


def _s(t: T) -> Shape:
    """The static shape of a present input (rules run on static inputs only)."""
    if t is None or t.shape is None:
        raise ValueError("input omitted")
    return tuple(int(d) for d in t.shape)  # type: ignore[arg-type]


def _like(x: TensorType, shape: Shape | None = None) -> TensorType:
    return TensorType(x.dtype, _s(x) if shape is None else shape)


# --- activations and normalizations --------------------------------------------------------------

@_safe
def like_input(x: TensorType, *rest: T, **attrs: Any) -> Types:
    """Gelu, BiasGelu, FastGelu, QuickGelu, BiasAdd, BiasSoftmax, RotaryEmbedding: x's type."""
    return _like(x)


@_safe
def bias_split_gelu(x: TensorType, *rest: T, **attrs: Any) -> Types:
    s = _s(x)
    if s[-1] % 2:
        raise ValueError("odd last dim")
    return _like(x, s[:-1] + (s[-1] // 2,))


def _stat(s: Shape, axis: int) -> Shape:
    """A statistic's shape: size-1 dims from ``axis`` on (keepdims)."""
    a = axis % len(s)
    return s[:a] + (1,) * (len(s) - a)


@_safe
def simplified_layer_norm(x: TensorType, scale: TensorType, **attrs: Any) -> Types:
    """Y (x broadcast with scale), inv_std_var (float32)."""
    s = _s(x)
    return [_like(x, np.broadcast_shapes(s, _s(scale))), TensorType(_F32, _stat(s, int(attrs.get("axis", -1))))]


@_safe
def layer_norm(x: TensorType, scale: TensorType, *rest: T, **attrs: Any) -> Types:
    """Y, Mean, InvStdDev (float32), as LayerNormalization-17."""
    s = _s(x)
    stat = TensorType(_F32, _stat(s, int(attrs.get("axis", -1))))
    return [_like(x, np.broadcast_shapes(s, _s(scale))), stat, stat]


@_safe
def skip_layer_norm(x: TensorType, *rest: T, **attrs: Any) -> Types:
    """output, mean, inv_std_var (float32, over the hidden axis), input_skip_bias_sum."""
    s = _s(x)
    stat = TensorType(_F32, s[:-1] + (1,))
    return [_like(x), stat, stat, _like(x)]


@_safe
def embed_layer_norm(ids: TensorType, segment_ids: T, word: TensorType, *rest: T, **attrs: Any) -> Types:
    """output (B, S, hidden), mask_index (B,) int32, embedding_sum (B, S, hidden)."""
    b, s = _s(ids)
    hidden = _s(word)[1]
    y = TensorType(word.dtype, (b, s, hidden))
    return [y, TensorType(_I32, (b,)), y]


# --- fused cube ops -------------------------------------------------------------------------------

def matmul_shape(a: Shape, b: Shape) -> Shape:
    """np.matmul's output shape (1-D operands included)."""
    if not a or not b:
        raise ValueError("0-d operand")
    a2, b2 = ((1,) + a if len(a) == 1 else a), (b + (1,) if len(b) == 1 else b)
    if a2[-1] != b2[-2]:
        raise ValueError("inner dims differ")
    return (tuple(np.broadcast_shapes(a2[:-2], b2[:-2])) + (a2[-2],) * (len(a) > 1) + (b2[-1],) * (len(b) > 1))


def _prepared(s: Shape, batch: bool, last: bool) -> Shape:
    """FusedMatMul's transBatch (dim 0 to the row position) and trans (swap the last two)."""
    if batch:
        s = s[1:-1] + (s[0], s[-1])
    return s[:-2] + (s[-1], s[-2]) if last and len(s) >= 2 else s


def _fused_matmul(a: TensorType, b: TensorType, attrs: dict[str, Any], batches: bool) -> Types:
    sa, sb = _s(a), _s(b)
    ba, bb = (bool(attrs.get("transBatchA", 0)), bool(attrs.get("transBatchB", 0))) if batches else (False, False)
    if (ba or bb) and not (len(sa) == len(sb) >= 3):
        raise ValueError("transBatch needs one rank >= 3")
    return _like(a, matmul_shape(_prepared(sa, ba, bool(attrs.get("transA", 0))),
                                 _prepared(sb, bb, bool(attrs.get("transB", 0)))))


@_safe
def fused_matmul(a: TensorType, b: TensorType, **attrs: Any) -> Types:
    return _fused_matmul(a, b, attrs, True)


@_safe
def transpose_matmul(a: TensorType, b: TensorType, **attrs: Any) -> Types:
    return _fused_matmul(a, b, attrs, False)


@_safe
def fused_gemm(a: TensorType, b: TensorType, *rest: T, **attrs: Any) -> Types:
    sa, sb = _s(a), _s(b)
    if len(sa) != 2 or len(sb) != 2:
        raise ValueError("Gemm takes 2-D operands")
    return _like(a, (sa[1] if attrs.get("transA", 0) else sa[0], sb[0] if attrs.get("transB", 0) else sb[1]))


@_safe
def gemm_fast_gelu(x: TensorType, w: TensorType, *rest: T, **attrs: Any) -> Types:
    return _like(x, matmul_shape(_s(x), _s(w)))


def _conv_shape(x: Shape, w: Shape, attrs: dict[str, Any]) -> Shape:
    """(N, M, out spatial..) of a channels-first Conv."""
    if len(x) < 3 or len(w) != len(x):
        raise ValueError("ranks")
    ctx = OpContext("Conv", attrs)
    nd = len(x) - 2
    out, _, _ = window_geometry(ctx, x[2:], list(w[2:]), spatial_ints(ctx, "strides", nd, 1),
                                spatial_ints(ctx, "dilations", nd, 1))
    return (x[0], w[0]) + tuple(out)


@_safe
def fused_conv(x: TensorType, w: TensorType, b: T = None, z: T = None, **attrs: Any) -> Types:
    y = _conv_shape(_s(x), _s(w), attrs)
    return _like(x, y if z is None else tuple(np.broadcast_shapes(y, _s(z))))


@_safe
def nhwc_conv(x: TensorType, w: TensorType, *rest: T, **attrs: Any) -> Types:
    first = lambda s: (s[0], s[-1]) + s[1:-1]  # noqa: E731  channels-last -> channels-first
    y = _conv_shape(first(_s(x)), first(_s(w)), attrs)
    return _like(x, (y[0],) + y[2:] + (y[1],))


# --- attention ------------------------------------------------------------------------------------

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


@_safe
def attention(x: TensorType, w: TensorType, bias: T = None, mask: T = None, past: T = None, *rest: T,
              **attrs: Any) -> Types:
    """output (B, S, D_v), present (2, B, N, P + S, H)."""
    b, s, _ = _s(x)
    n = _heads(attrs)
    d_all = _s(w)[1]
    dq, dk, dv = [int(v) for v in attrs.get("qkv_hidden_sizes", [])] or [d_all // 3] * 3
    if dq != dk or dq + dk + dv != d_all or dv % n or dk % n:
        raise ValueError("qkv_hidden_sizes do not split the weights")
    out = _like(x, (b, s, dv))
    if dk != dv:
        return [out, TensorType()]    # K and V do not stack into a present
    p = 0 if past is None else _s(past)[3]
    return [out, _like(x, (2, b, n, p + s, dk // n))]


def _mha_kv(q: Shape, key: T, value: T, n: int) -> tuple[Shape, Shape]:
    """K and V as (B, N, L, H) from MultiHeadAttention's input forms (after ``_mha_inputs``)."""
    if len(q) == 5:  # packed QKV (B, S, N, 3, H)
        kv = (q[0], q[2], q[1], q[4])
        return kv, kv
    k = _s(key)
    if len(k) == 5:  # packed KV (B, L, N, 2, H)
        kv = (k[0], k[2], k[1], k[4])
        return kv, kv
    v = _s(value)
    if len(k) == 4:  # already BNSH
        return k, v
    return (k[0], n, k[1], _split(k[2], n)), (v[0], n, v[1], _split(v[2], n))


@_safe
def multi_head_attention(query: TensorType, key: T = None, value: T = None, bias: T = None, kpm: T = None,
                         attn_bias: T = None, past_key: T = None, past_value: T = None, *rest: T,
                         **attrs: Any) -> Types:
    """output (B, S, N * H_v), present_key/value (B, N, P + L, H), qk (B, N, S, P + L)."""
    q = _s(query)
    n = _heads(attrs)
    if len(q) not in (3, 5):
        raise ValueError("query rank")
    b, s = q[:2]
    h = q[4] if len(q) == 5 else _split(q[2], n)
    k, v = _mha_kv(q, key, value, n)
    if past_key is not None and past_value is not None:
        pk, pv = _s(past_key), _s(past_value)
        k, v = k[:2] + (pk[2] + k[2],) + k[3:], v[:2] + (pv[2] + v[2],) + v[3:]
    if k[3] != h:
        raise ValueError("key head size differs from the query's")
    heads = tuple(np.broadcast_shapes((b, n), k[:2], v[:2]))
    return [_like(query, (b, s, heads[1] * v[3])), _like(query, k), _like(query, v),
            _like(query, heads + (s, k[2]))]


@_safe
def group_query_attention(query: TensorType, key: T = None, value: T = None, past_key: T = None,
                          *rest: T, **attrs: Any) -> Types:
    """output (B, S, N * H); present_key/value (B, K, ?, H) and output_qk (B, N, S, ?): their
    length is total_sequence_length's value (or the past buffer's, if longer)."""
    b, s, d = _s(query)
    n, kv = _heads(attrs), _heads(attrs, "kv_num_heads")
    h = _split(d, n + 2 * kv) if key is None else _split(d, n)
    present = TensorType(query.dtype, (b, kv, None, h))
    return [_like(query, (b, s, n * h)), present, present, TensorType(query.dtype, (b, n, s, None))]


# --- registration ---------------------------------------------------------------------------------

RULES: dict[tuple[str, str], Callable[..., Types]] = {
    **{(DOMAIN, op): like_input for op in ("Gelu", "BiasGelu", "FastGelu", "QuickGelu", "BiasAdd", "BiasSoftmax",
                                           "RotaryEmbedding")},
    (DOMAIN, "BiasSplitGelu"): bias_split_gelu,
    (DOMAIN, "SkipLayerNormalization"): skip_layer_norm,
    (DOMAIN, "SkipSimplifiedLayerNormalization"): skip_layer_norm,
    (DOMAIN, "EmbedLayerNormalization"): embed_layer_norm,
    (DOMAIN, "FusedMatMul"): fused_matmul, (DOMAIN, "TransposeMatMul"): transpose_matmul,
    (DOMAIN, "FusedGemm"): fused_gemm, (DOMAIN, "GemmFastGelu"): gemm_fast_gelu,
    (DOMAIN, "FusedConv"): fused_conv, (DOMAIN, "NhwcConv"): nhwc_conv,
    (DOMAIN, "Attention"): attention, (DOMAIN, "MultiHeadAttention"): multi_head_attention,
    (DOMAIN, "GroupQueryAttention"): group_query_attention,
    ("", "SimplifiedLayerNormalization"): simplified_layer_norm,
    ("", "LayerNormalization"): layer_norm,   # ORT's, before onnx's LayerNormalization-17
}


def _attach() -> None:
    for (domain, op), rule in RULES.items():
        d = registry.lookup_def(op, domain, 1)
        assert d is not None, op   # the kernel modules imported above register every op here
        registry.update(op, domain, 1, rules=CustomKernel(op, domain, d.fn, rule, None, positional=True))


_attach()
