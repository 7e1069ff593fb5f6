"""ONNX Runtime's fused activations (com.microsoft): the Gelu family, QuickGelu, BiasAdd,
BiasSoftmax.

Exact Gelu is onnx Gelu-20's kernel (``nn.gelu``); FastGelu's tanh formula
0.5x(1 + tanh(0.797885x + 0.035677x^3)) is the same function as its ``approximate="tanh"``.
float16 is computed in float32 and rounded once, as onnxruntime does.
"""

from __future__ import annotations

import numpy as np

from graphexec.kernels.contrib_util import DOMAIN, attr_check, need, refuse, reuse, work
from graphexec.kernels.gelu_erf import gelu_erf
from graphexec.kernels.nn import gelu as _onnx_gelu
from graphexec.kernels.nn import softmax as _onnx_softmax
from graphexec.kernels.registry import OpContext, register

_ERF = OpContext("Gelu", {"approximate": "none"})
_TANH = OpContext("Gelu", {"approximate": "tanh"})


def _checked(ctx: OpContext, x: np.ndarray, bias: np.ndarray | None) -> tuple[np.ndarray, np.ndarray | None]:
    """x and bias in the compute dtype; the bias is 1-D, one value per last-axis element."""
    xw, bw = work(ctx, x, bias)
    if bw is not None and (bw.ndim != 1 or x.ndim == 0 or bw.shape[0] != x.shape[-1]):
        refuse(ctx, f"bias of shape {bw.shape} does not fit input {x.shape} (one value per last-axis element)")
    return xw, bw


def _biased(ctx: OpContext, x: np.ndarray, bias: np.ndarray | None) -> np.ndarray:
    """x + bias in the compute dtype."""
    xw, bw = _checked(ctx, x, bias)
    return xw if bw is None else xw + bw


def _erf_gelu(ctx: OpContext, x: np.ndarray, bias: np.ndarray | None) -> np.ndarray:
    """Gelu(x + bias), erf form, in x's dtype. float32 math goes through ``gelu_erf``'s
    pieces: the bits of the whole-tensor formula (float64 erfc, rounded to float32, then to
    x's dtype), without its whole-tensor temporaries (128x1536: about 3.5x faster; at
    MiniLM's 32x1536 the same time)."""
    xw, bw = _checked(ctx, x, bias)
    if xw.dtype == np.float32 and (bw is None or bw.dtype == np.float32):
        return gelu_erf(xw, np.dtype(np.float32), bw).astype(x.dtype, copy=False)
    return _onnx_gelu(_ERF, xw if bw is None else xw + bw).astype(x.dtype)


@register("Gelu", domain=DOMAIN)
def gelu(ctx: OpContext, x: np.ndarray) -> np.ndarray:
    """0.5 x (1 + erf(x / sqrt 2)), the erf form (BERT's)."""
    return _erf_gelu(ctx, x, None)


@register("BiasGelu", domain=DOMAIN)
def bias_gelu(ctx: OpContext, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Gelu(A + B): the bias Add that precedes a Gelu, fused."""
    return _erf_gelu(ctx, a, b)


@register("FastGelu", domain=DOMAIN)
def fast_gelu(ctx: OpContext, x: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
    """The tanh approximation of Gelu, of x + bias when a bias is given."""
    return _onnx_gelu(_TANH, _biased(ctx, x, bias)).astype(x.dtype)


@register("QuickGelu", domain=DOMAIN)
def quick_gelu(ctx: OpContext, x: np.ndarray) -> np.ndarray:
    """x * sigmoid(alpha x), the sigmoid approximation CLIP uses (alpha 1.702)."""
    (xw,) = work(ctx, x)
    z = xw * xw.dtype.type(ctx.attrs.get("alpha", 1.702))
    with np.errstate(over="ignore"):
        return (xw / (1 + np.exp(-z))).astype(x.dtype)


@register("BiasSplitGelu", domain=DOMAIN)
def bias_split_gelu(ctx: OpContext, x: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """Stable Diffusion's GEGLU: (x + bias) split in halves on the last axis, left * Gelu(right)."""
    h = _biased(ctx, x, bias)
    if h.shape[-1] % 2:
        refuse(ctx, f"last dim {h.shape[-1]} of input {x.shape} is odd; it must split in two halves")
    left, right = np.split(h, 2, axis=-1)
    return (left * _onnx_gelu(_ERF, right)).astype(x.dtype)


@register("BiasAdd", domain=DOMAIN)
def bias_add(ctx: OpContext, x: np.ndarray, bias: np.ndarray, skip: np.ndarray) -> np.ndarray:
    """x + bias + skip: the bias of a projection and the residual it joins, in one pass."""
    (sw,) = work(ctx, skip)
    if skip.shape != x.shape:
        refuse(ctx, f"skip of shape {skip.shape} differs from input {x.shape}")
    return (_biased(ctx, x, bias) + sw).astype(x.dtype)


@register("BiasSoftmax", domain=DOMAIN, check=attr_check(lambda ctx: need(ctx, "is_inner_broadcast")))
def bias_softmax(ctx: OpContext, x: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """softmax(x + bias) over the dims from ``axis`` on, flattened as Softmax-11 does (a fused
    attention mask add); the bias broadcasts numpy-style, is_inner_broadcast only tells ORT's
    CUDA kernel which dims it repeats over."""
    need(ctx, "is_inner_broadcast")
    xw, bw = work(ctx, x, bias)
    try:
        z = xw + bw
    except ValueError:
        refuse(ctx, f"bias of shape {bias.shape} does not broadcast to input {x.shape}")
    if z.shape != x.shape:
        refuse(ctx, f"bias of shape {bias.shape} would broadcast input {x.shape} to {z.shape}")
    inner = OpContext("Softmax", {"axis": int(ctx.attrs.get("axis", 1))}, 11, 1, ctx.name)
    return reuse(ctx, _onnx_softmax, inner, z).astype(x.dtype)
