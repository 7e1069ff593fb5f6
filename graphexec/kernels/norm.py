"""Normalizations not covered elsewhere: GroupNormalization, InstanceNormalization."""

from __future__ import annotations

import numpy as np

from graphexec.kernels.registry import OpContext, Unsupported, register


def _group_norm(x: np.ndarray, groups: int, eps: float) -> np.ndarray:
    n, c = x.shape[:2]
    if c % groups:
        raise Unsupported(f"{c} channels do not split into {groups} groups")
    g = x.reshape(n, groups, -1).astype(np.float32 if x.dtype != np.float64 else np.float64)
    mean = g.mean(axis=2, keepdims=True)
    var = g.var(axis=2, keepdims=True)
    return ((g - mean) / np.sqrt(var + eps)).reshape(x.shape)


@register("GroupNormalization", since=21)
def group_normalization(ctx: OpContext, x: np.ndarray, scale: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """Opset 21: scale and bias are per channel; statistics in float32 (stash_type 1)."""
    if ctx.attr("stash_type", 1) != 1:
        raise Unsupported("stash_type other than float32")
    y = _group_norm(x, ctx.attr("num_groups"), ctx.attr("epsilon", 1e-5))
    bshape = (1, -1) + (1,) * (x.ndim - 2)
    return (y * scale.reshape(bshape) + bias.reshape(bshape)).astype(x.dtype)


@register("GroupNormalization", since=18, until=20)
def group_normalization_18(ctx: OpContext, x: np.ndarray, scale: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """Opset 18: scale and bias are per group, repeated over the group's channels."""
    groups = ctx.attr("num_groups")
    y = _group_norm(x, groups, ctx.attr("epsilon", 1e-5))
    per = x.shape[1] // groups
    bshape = (1, -1) + (1,) * (x.ndim - 2)
    return (y * np.repeat(scale, per).reshape(bshape) + np.repeat(bias, per).reshape(bshape)).astype(x.dtype)


@register("InstanceNormalization")
def instance_normalization(ctx: OpContext, x: np.ndarray, scale: np.ndarray, bias: np.ndarray) -> np.ndarray:
    axes = tuple(range(2, x.ndim))
    mean = x.mean(axis=axes, keepdims=True)
    var = x.var(axis=axes, keepdims=True)
    bshape = (1, -1) + (1,) * (x.ndim - 2)
    y = (x - mean) / np.sqrt(var + ctx.attr("epsilon", 1e-5))
    return (y * scale.reshape(bshape) + bias.reshape(bshape)).astype(x.dtype)


@register("Scatter", until=10)
def scatter(ctx: OpContext, data: np.ndarray, indices: np.ndarray, updates: np.ndarray) -> np.ndarray:
    """The deprecated Scatter (opsets 9-10): ScatterElements without reduction."""
    axis = ctx.attr("axis", 0)
    out = data.copy()
    idx = np.where(indices < 0, indices + data.shape[axis], indices)
    np.put_along_axis(out, idx.astype(np.int64), updates, axis=axis)
    return out
