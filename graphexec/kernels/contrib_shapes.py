"""Output types of the float com.microsoft ops (the attention ops' rules are in
contrib_attention_shapes.py), DynamicQuantizeLSTM, and ORT's SimplifiedLayerNormalization
and pre-17 LayerNormalization in the ONNX domain: onnx's shape inference knows none of
them, so without these rules their outputs, and everything downstream, stay dynamic (no
planned memory, degraded costs).

Importing the module attaches each rule to its kernel's registry entry (the rules slot
shape inference reads, as for quant_shapes.py's ops). A rule gets every input by position,
None where an optional one is omitted, and follows what its kernel returns: unknown for
inputs the kernel refuses, an unknown dim for a runtime size (GroupQueryAttention's cache).
"""

from __future__ import annotations

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
    rnn,
)
from graphexec.kernels.contrib_attention_shapes import attention, group_query_attention, multi_head_attention
from graphexec.kernels.contrib_util import DOMAIN, Shape, T, Types, like, safe_rule, static
from graphexec.kernels.conv import spatial_ints, window_geometry
from graphexec.kernels.custom import CustomKernel
from graphexec.kernels.registry import OpContext

_F32 = np.dtype(np.float32)
_I32 = np.dtype(np.int32)


# --- activations and normalizations --------------------------------------------------------------

@safe_rule
def like_input(x: TensorType, *rest: T, **attrs: Any) -> Types:
    """Gelu, BiasGelu, FastGelu, QuickGelu, BiasAdd, BiasSoftmax, RotaryEmbedding: x's type."""
    return like(x)


@safe_rule
def bias_split_gelu(x: TensorType, *rest: T, **attrs: Any) -> Types:
    s = static(x)
    if s[-1] % 2:
        raise ValueError("odd last dim")
    return like(x, s[:-1] + (s[-1] // 2,))


def _stat(s: Shape, axis: int) -> Shape:
    """A statistic's shape: size-1 dims from ``axis`` on (keepdims)."""
    a = axis % len(s)
    return s[:a] + (1,) * (len(s) - a)


@safe_rule
def simplified_layer_norm(x: TensorType, scale: TensorType, **attrs: Any) -> Types:
    """Y (x broadcast with scale), inv_std_var (float32)."""
    s = static(x)
    return [like(x, np.broadcast_shapes(s, static(scale))), TensorType(_F32, _stat(s, int(attrs.get("axis", -1))))]


@safe_rule
def layer_norm(x: TensorType, scale: TensorType, *rest: T, **attrs: Any) -> Types:
    """Y, Mean, InvStdDev (float32), as LayerNormalization-17."""
    s = static(x)
    stat = TensorType(_F32, _stat(s, int(attrs.get("axis", -1))))
    return [like(x, np.broadcast_shapes(s, static(scale))), stat, stat]


@safe_rule
def skip_layer_norm(x: TensorType, *rest: T, **attrs: Any) -> Types:
    """output, mean, inv_std_var (float32, over the hidden axis), input_skip_bias_sum."""
    s = static(x)
    stat = TensorType(_F32, s[:-1] + (1,))
    return [like(x), stat, stat, like(x)]


@safe_rule
def embed_layer_norm(ids: TensorType, segment_ids: T, word: TensorType, *rest: T, **attrs: Any) -> Types:
    """output (B, S, hidden), mask_index (B,) int32, embedding_sum (B, S, hidden)."""
    b, s = static(ids)
    hidden = static(word)[1]
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
    sa, sb = static(a), static(b)
    ba, bb = (bool(attrs.get("transBatchA", 0)), bool(attrs.get("transBatchB", 0))) if batches else (False, False)
    if (ba or bb) and not (len(sa) == len(sb) >= 3):
        raise ValueError("transBatch needs one rank >= 3")
    return like(a, matmul_shape(_prepared(sa, ba, bool(attrs.get("transA", 0))),
                                 _prepared(sb, bb, bool(attrs.get("transB", 0)))))


@safe_rule
def fused_matmul(a: TensorType, b: TensorType, **attrs: Any) -> Types:
    return _fused_matmul(a, b, attrs, True)


@safe_rule
def transpose_matmul(a: TensorType, b: TensorType, **attrs: Any) -> Types:
    return _fused_matmul(a, b, attrs, False)


@safe_rule
def fused_gemm(a: TensorType, b: TensorType, *rest: T, **attrs: Any) -> Types:
    sa, sb = static(a), static(b)
    if len(sa) != 2 or len(sb) != 2:
        raise ValueError("Gemm takes 2-D operands")
    return like(a, (sa[1] if attrs.get("transA", 0) else sa[0], sb[0] if attrs.get("transB", 0) else sb[1]))


@safe_rule
def gemm_fast_gelu(x: TensorType, w: TensorType, *rest: T, **attrs: Any) -> Types:
    return like(x, matmul_shape(static(x), static(w)))


def _conv_shape(x: Shape, w: Shape, attrs: dict[str, Any]) -> Shape:
    """(N, M, out spatial..) of a channels-first Conv."""
    if len(x) < 3 or len(w) != len(x):
        raise ValueError("ranks")
    ctx = OpContext("Conv", attrs)
    nd = len(x) - 2
    out, _, _ = window_geometry(ctx, x[2:], list(w[2:]), spatial_ints(ctx, "strides", nd, 1),
                                spatial_ints(ctx, "dilations", nd, 1))
    return (x[0], w[0]) + tuple(out)


@safe_rule
def fused_conv(x: TensorType, w: TensorType, b: T = None, z: T = None, **attrs: Any) -> Types:
    y = _conv_shape(static(x), static(w), attrs)
    return like(x, y if z is None else tuple(np.broadcast_shapes(y, static(z))))


@safe_rule
def nhwc_conv(x: TensorType, w: TensorType, *rest: T, **attrs: Any) -> Types:
    first = lambda s: (s[0], s[-1]) + s[1:-1]  # noqa: E731  channels-last -> channels-first
    y = _conv_shape(first(static(x)), first(static(w)), attrs)
    return like(x, (y[0],) + y[2:] + (y[1],))


@safe_rule
def dynamic_quantize_lstm(x: TensorType, w: TensorType, r: TensorType, *rest: T, **attrs: Any) -> Types:
    """Y (seq, dirs, batch, H), Y_h and Y_c (dirs, batch, H), X's float32 (no layout: opset 1)."""
    seq, batch, _ = static(x)
    dirs, hidden = (2 if attrs.get("direction") == "bidirectional" else 1), static(r)[1]
    state = like(x, (dirs, batch, hidden))
    return [like(x, (seq, dirs, batch, hidden)), state, state]


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
    (DOMAIN, "DynamicQuantizeLSTM"): dynamic_quantize_lstm,
    ("", "SimplifiedLayerNormalization"): simplified_layer_norm,
    ("", "LayerNormalization"): layer_norm,   # ORT's, before onnx's LayerNormalization-17
}


def _attach() -> None:
    for (domain, op), rule in RULES.items():
        d = registry.lookup_def(op, domain, 1)
        assert d is not None, op   # the kernel modules imported above register every op here
        registry.update(op, domain, 1, rules=CustomKernel(op, domain, d.fn, rule, None, positional=True))


_attach()
