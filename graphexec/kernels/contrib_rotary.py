"""Rotary position embedding (RoPE), ONNX Runtime's RotaryEmbedding (com.microsoft).

``rotate`` is shared with GroupQueryAttention's do_rotary: the first R dims of each head
turn by position-dependent angles given as cos/sin caches of shape (max_positions, R/2);
the rest of the head passes through.
"""

from __future__ import annotations

import numpy as np

from graphexec.kernels.contrib_util import DOMAIN, attr_check, flag, ints, refuse, work
from graphexec.kernels.registry import OpContext, register


def rotate(x: np.ndarray, cos: np.ndarray, sin: np.ndarray, interleaved: bool) -> np.ndarray:
    """RoPE on x (..., H) with cos/sin (..., R/2) broadcast over x's leading dims.

    interleaved: pairs (x[2i], x[2i+1]) (GPT-J); otherwise halves (x[i], x[i + R/2]) (GPT-NeoX, LLaMA).
    """
    r = 2 * cos.shape[-1]
    rot, rest = x[..., :r], x[..., r:]
    if interleaved:
        a, b = rot[..., 0::2], rot[..., 1::2]
        out = np.stack([a * cos - b * sin, b * cos + a * sin], axis=-1).reshape(rot.shape)
    else:
        a, b = rot[..., :r // 2], rot[..., r // 2:]
        out = np.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1)
    return np.concatenate([out, rest], axis=-1) if rest.shape[-1] else out


def cache_rows(ctx: OpContext, cache: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """cache[positions], with the node's error for a position past the cache."""
    if positions.size and (positions.min() < 0 or positions.max() >= cache.shape[0]):
        refuse(ctx, f"positions up to {int(positions.max())} outside the cos/sin cache of {cache.shape[0]} rows")
    return cache[positions]


def _rotary_attrs(ctx: OpContext) -> tuple[int, int]:
    """RotaryEmbedding's attribute refusals (also its compile-time check); (rotary dim, heads), 0 if unset."""
    if flag(ctx, "is_packed_batching"):
        refuse(ctx, "is_packed_batching (ragged batches) is not supported")
    flag(ctx, "interleaved")
    dim, heads = int(ctx.attrs.get("rotary_embedding_dim", 0)), int(ctx.attrs.get("num_heads", 0))
    if dim and not heads:
        refuse(ctx, "rotary_embedding_dim needs num_heads")
    return dim, heads


@register("RotaryEmbedding", domain=DOMAIN, check=attr_check(_rotary_attrs))
def rotary_embedding(ctx: OpContext, x: np.ndarray, position_ids: np.ndarray, cos_cache: np.ndarray,
                     sin_cache: np.ndarray) -> np.ndarray:
    """RoPE on (B, S, N*H) or (B, N, S, H); position_ids is (B, S), or (1,): the offset of position 0."""
    dim, heads = _rotary_attrs(ctx)
    if x.ndim not in (3, 4) or cos_cache.shape != sin_cache.shape or cos_cache.ndim != 2:
        refuse(ctx, f"input {x.shape}, caches {cos_cache.shape}/{sin_cache.shape}; expected a 3-D or 4-D "
                    "input and two (max_positions, R/2) caches")
    b, s = x.shape[0], x.shape[2] if x.ndim == 4 else x.shape[1]
    if x.ndim == 4:
        head = x.shape[3]
    else:
        head = x.shape[2] // heads if heads else 2 * cos_cache.shape[1]
    dim = dim or head
    if x.ndim == 3 and x.shape[2] % head or dim > head or dim != 2 * cos_cache.shape[1]:
        refuse(ctx, f"rotary dim {dim}, head size {head} and caches {cos_cache.shape} do not fit input {x.shape}")
    pos = ints(ctx, position_ids, "position_ids")
    pos = pos.reshape(-1)[0] + np.arange(s)[None] if pos.size == 1 and pos.shape != (b, s) else pos
    if pos.shape not in ((b, s), (1, s)):
        refuse(ctx, f"position_ids of shape {position_ids.shape}; expected ({b}, {s}) or (1,)")
    xw, cw, sw = work(ctx, x, cos_cache, sin_cache)
    cos, sin = cache_rows(ctx, cw, pos)[..., :dim // 2], cache_rows(ctx, sw, pos)[..., :dim // 2]
    if x.ndim == 4:  # (B, N, S, H): broadcast over heads
        return rotate(xw, cos[:, None], sin[:, None], flag(ctx, "interleaved")).astype(x.dtype)
    heads_x = xw.reshape(b, s, -1, head)
    return rotate(heads_x, cos[:, :, None], sin[:, :, None], flag(ctx, "interleaved")).reshape(x.shape).astype(x.dtype)
