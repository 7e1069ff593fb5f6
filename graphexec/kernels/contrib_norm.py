"""ONNX Runtime's fused normalizations: SkipLayerNormalization and its RMS form,
SimplifiedLayerNormalization (RMSNorm), the pre-17 LayerNormalization and BERT's
EmbedLayerNormalization.

ORT registers SimplifiedLayerNormalization and LayerNormalization (version 1) in the
default ONNX domain, which onnx itself leaves empty before LayerNormalization-17.
Statistics are float32 outputs; float16 data is normalized in float32, rounded once.
"""

from __future__ import annotations

import numpy as np

from graphexec.kernels.contrib_util import DOMAIN, ints, refuse, reuse, work
from graphexec.kernels.nn import layer_norm as _onnx_layer_norm
from graphexec.kernels.registry import OpContext, register


def _axis(ctx: OpContext, x: np.ndarray) -> int:
    axis = int(ctx.attrs.get("axis", -1))
    if not -x.ndim <= axis < x.ndim:
        refuse(ctx, f"axis {axis} for an input of rank {x.ndim}")
    return axis % x.ndim


def _rms(x: np.ndarray, axis: int, eps: float) -> np.ndarray:
    """1 / sqrt(mean(x^2) + eps) over axes [axis, rank), kept as size-1 dims."""
    red = tuple(range(axis, x.ndim))
    return 1 / np.sqrt(np.mean(x * x, axis=red, keepdims=True) + x.dtype.type(eps))


def _layer_norm(ctx: OpContext, x: np.ndarray, gamma: np.ndarray, beta: np.ndarray | None, axis: int,
                eps: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(y, mean, inv_std) by onnx LayerNormalization-17's kernel, on float32 or float64 data."""
    if x.dtype == np.float64:  # nn.layer_norm keeps float32 statistics only
        x, gamma = x.astype(np.float32), gamma.astype(np.float32)
        beta = None if beta is None else beta.astype(np.float32)
    key = ("ln17", axis, eps)
    inner = ctx.cache.get(key)
    if inner is None:   # the onnx node this one runs as, made once per node
        attrs = {"axis": axis, "epsilon": eps, "stash_type": int(ctx.attrs.get("stash_type", 1))}
        inner = ctx.cache[key] = OpContext("LayerNormalization", attrs, 17, 3, ctx.name)
    y, mean, inv = reuse(ctx, _onnx_layer_norm, inner, x, gamma, beta)
    return y, mean, inv


def _stats(ctx: OpContext, *stats: np.ndarray) -> tuple[np.ndarray, ...]:
    """The node's outputs 1.. as float32 statistics, trimmed to the outputs it declares."""
    return tuple(s.astype(np.float32, copy=False) for s in stats)[:max(ctx.num_outputs - 1, 0)]


@register("SimplifiedLayerNormalization", since=1)
def simplified_layer_norm(ctx: OpContext, x: np.ndarray, scale: np.ndarray):
    """RMSNorm (T5, LLaMA): x / sqrt(mean(x^2) + eps) * scale, over axes [axis, rank)."""
    xw, sw = work(ctx, x, scale)
    inv = _rms(xw, _axis(ctx, x), float(ctx.attrs.get("epsilon", 1e-5)))
    y = (xw * inv * sw).astype(x.dtype)
    return (y, *_stats(ctx, inv)) if ctx.num_outputs > 1 else y


@register("LayerNormalization", since=1, until=16)
def layer_norm_v1(ctx: OpContext, x: np.ndarray, scale: np.ndarray, b: np.ndarray | None = None):
    """ORT's LayerNormalization for opsets before onnx defined it: the same as version 17."""
    xw, sw, bw = work(ctx, x, scale, b)
    y, mean, inv = _layer_norm(ctx, xw, sw, bw, _axis(ctx, x), float(ctx.attrs.get("epsilon", 1e-5)))
    return (y.astype(x.dtype, copy=False), *_stats(ctx, mean, inv)) if ctx.num_outputs > 1 else \
        y.astype(x.dtype, copy=False)


def _skip_sum(ctx: OpContext, x: np.ndarray, skip: np.ndarray, bias: np.ndarray | None) -> np.ndarray:
    """input + skip (+ bias) in float32; skip repeats over the leading dims (ORT reads it modulo its size)."""
    if x.ndim not in (2, 3):
        refuse(ctx, f"input of rank {x.ndim}; expected (batch, seq, hidden) or (tokens, hidden)")
    if x.dtype == np.float64:
        refuse(ctx, "float64 input; the op takes float16 or float32")
    if skip.shape[-1:] != x.shape[-1:] or skip.ndim > x.ndim or skip.shape != x.shape[x.ndim - skip.ndim:] \
            and skip.shape != (1,) + x.shape[1:]:
        refuse(ctx, f"skip of shape {skip.shape} does not broadcast to input {x.shape}")
    xw, sw, bw = work(ctx, x, skip, bias)
    s = xw + sw
    if bw is not None:
        s += bw   # (x + skip) + bias, in the sum's own new array
    return s


def _skip_outputs(ctx: OpContext, y: np.ndarray, s: np.ndarray, mean: np.ndarray, inv: np.ndarray,
                  dtype: np.dtype):
    """The declared outputs only, each converted (copied) only where its dtype differs."""
    if ctx.num_outputs <= 1:
        return y.astype(dtype, copy=False)
    outs = (y.astype(dtype, copy=False), mean.astype(np.float32, copy=False), inv.astype(np.float32, copy=False),
            s.astype(dtype, copy=False))
    return outs[:ctx.num_outputs]


@register("SkipLayerNormalization", domain=DOMAIN)
def skip_layer_norm(ctx: OpContext, x: np.ndarray, skip: np.ndarray, gamma: np.ndarray,
                    beta: np.ndarray | None = None, bias: np.ndarray | None = None):
    """LayerNorm(input + skip + bias) * gamma + beta over the hidden axis: a residual joint of a transformer."""
    s = _skip_sum(ctx, x, skip, bias)
    gw, bw = work(ctx, gamma, beta)
    y, mean, inv = _layer_norm(ctx, s, gw, bw, -1, float(ctx.attrs.get("epsilon", 1e-12)))
    return _skip_outputs(ctx, y, s, mean, inv, x.dtype)


@register("SkipSimplifiedLayerNormalization", domain=DOMAIN)
def skip_simplified_layer_norm(ctx: OpContext, x: np.ndarray, skip: np.ndarray, gamma: np.ndarray,
                               bias: np.ndarray | None = None):
    """RMSNorm(input + skip + bias) * gamma; its mean output is zeros (no centering)."""
    s = _skip_sum(ctx, x, skip, bias)
    (gw,) = work(ctx, gamma)
    inv = _rms(s, s.ndim - 1, float(ctx.attrs.get("epsilon", 1e-12)))
    return _skip_outputs(ctx, s * inv * gw, s, np.zeros_like(inv), inv, x.dtype)


def _lookup(ctx: OpContext, table: np.ndarray, ids: np.ndarray, what: str) -> np.ndarray:
    if ids.size and (ids.min() < 0 or ids.max() >= table.shape[0]):
        refuse(ctx, f"{what} outside [0, {table.shape[0]})")
    return np.take(table, ids, axis=0)


@register("EmbedLayerNormalization", domain=DOMAIN)
def embed_layer_norm(ctx: OpContext, input_ids: np.ndarray, segment_ids: np.ndarray | None,
                     word: np.ndarray, position: np.ndarray, segment: np.ndarray | None, gamma: np.ndarray,
                     beta: np.ndarray, mask: np.ndarray | None = None, position_ids: np.ndarray | None = None):
    """BERT's embedding layer: word + position (+ segment) embeddings, LayerNorm; mask_index counts
    each row's mask ones (zeros without a mask); embedding_sum is the sum before the norm."""
    ids = ints(ctx, input_ids, "input_ids")
    if ids.ndim != 2:
        refuse(ctx, f"input_ids of shape {ids.shape}; expected (batch, sequence)")
    tables = (word, position) if segment is None else (word, position, segment)
    e = _lookup(ctx, word, ids, "input_ids").astype(np.result_type(*tables), copy=False)   # new: summed in place
    if position_ids is None:   # positions 0..S-1: the table's first rows, added to every batch row
        if ids.shape[1] > position.shape[0]:
            refuse(ctx, f"position_ids outside [0, {position.shape[0]})")
        e += position[:ids.shape[1]]
    else:
        pos = ints(ctx, position_ids, "position_ids")
        e += _lookup(ctx, position, np.broadcast_to(pos, ids.shape), "position_ids")
    if segment is not None and segment_ids is not None:
        e += _lookup(ctx, segment, ints(ctx, segment_ids, "segment_ids"), "segment_ids")
    ew, gw, bw = work(ctx, e, gamma, beta)
    y, _, _ = _layer_norm(ctx, ew, gw, bw, -1, float(ctx.attrs.get("epsilon", 1e-12)))
    if mask is None:
        index = np.zeros(ids.shape[0], dtype=np.int32)
    else:
        index = (ints(ctx, mask, "mask") == 1).sum(axis=1).astype(np.int32)
    return (y.astype(word.dtype, copy=False), index, e.astype(word.dtype, copy=False))[:max(ctx.num_outputs, 1)]
