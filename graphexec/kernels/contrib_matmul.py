"""ONNX Runtime's fused cube ops: FusedMatMul (and its old name TransposeMatMul), FusedGemm,
FusedConv, NhwcConv and GemmFastGelu, each an onnx kernel plus a layout step or an activation.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from graphexec.kernels import registry
from graphexec.kernels.contrib_act import fast_gelu
from graphexec.kernels.contrib_util import DOMAIN, attr_check, flag, refuse, reuse, work
from graphexec.kernels.conv import conv as _onnx_conv
from graphexec.kernels.nn import gemm as _onnx_gemm
from graphexec.kernels.registry import OpContext, register


def _prepare(ctx: OpContext, x: np.ndarray, batch: bool, last: bool) -> np.ndarray:
    """transBatch moves dim 0 to the row position ([M, b.., K] -> [b.., M, K]); trans swaps the last two."""
    if batch:
        x = np.moveaxis(x, 0, -2)
    return np.swapaxes(x, -1, -2) if last and x.ndim >= 2 else x


def _fused_matmul(ctx: OpContext, a: np.ndarray, b: np.ndarray, batch_a: bool, batch_b: bool) -> np.ndarray:
    if (batch_a or batch_b) and not (a.ndim == b.ndim and a.ndim >= 3):
        refuse(ctx, f"transBatchA/B need inputs of one rank >= 3, got {a.shape} and {b.shape}")
    aw, bw = work(ctx, a, b)
    aw = _prepare(ctx, aw, batch_a, flag(ctx, "transA"))
    bw = _prepare(ctx, bw, batch_b, flag(ctx, "transB"))
    try:
        y = np.matmul(aw, bw)
    except ValueError:
        refuse(ctx, f"inputs {a.shape} and {b.shape} do not multiply under the node's transposes")
    alpha = float(ctx.attrs.get("alpha", 1.0))
    return (y * y.dtype.type(alpha) if alpha != 1.0 else y).astype(a.dtype)


def _flags(*keys: str) -> Callable[[OpContext], None]:
    """A check that ``keys`` are 0/1 switches."""
    def check(ctx: OpContext) -> None:
        for key in keys:
            flag(ctx, key)
    return check


@register("FusedMatMul", domain=DOMAIN, check=attr_check(_flags("transA", "transB", "transBatchA", "transBatchB")))
def fused_matmul(ctx: OpContext, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """alpha * A' @ B', the Transposes and the Mul/Div by a scale folded into a MatMul."""
    return _fused_matmul(ctx, a, b, flag(ctx, "transBatchA"), flag(ctx, "transBatchB"))


@register("TransposeMatMul", domain=DOMAIN, check=attr_check(_flags("transA", "transB")))
def transpose_matmul(ctx: OpContext, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """FusedMatMul's older name, without the batch transposes."""
    return _fused_matmul(ctx, a, b, False, False)


def _onnx_act(op: str, **attrs: float) -> Callable[[np.ndarray], np.ndarray]:
    def run(x: np.ndarray) -> np.ndarray:
        fn = registry.lookup(op, "", 17)
        assert fn is not None, op  # elementwise.py registers every activation named here
        return fn(OpContext(op, attrs, 17), x)
    return run


def _activation(ctx: OpContext, name: str, params: list[float]) -> Callable[[np.ndarray], np.ndarray]:
    """The activation MLAS fuses after a Gemm or Conv, from its name and float parameters."""
    p = params + [0.0] * 3
    table: dict[str, tuple[int, Callable[[np.ndarray], np.ndarray]]] = {
        "Relu": (0, _onnx_act("Relu")), "Tanh": (0, np.tanh), "Sigmoid": (0, _onnx_act("Sigmoid")),
        "Silu": (0, lambda x: x * _onnx_act("Sigmoid")(x)), "Softsign": (0, _onnx_act("Softsign")),
        "Softplus": (0, _onnx_act("Softplus")), "LeakyRelu": (1, _onnx_act("LeakyRelu", alpha=p[0])),
        "Elu": (1, _onnx_act("Elu", alpha=p[0])), "ThresholdedRelu": (1, _onnx_act("ThresholdedRelu", alpha=p[0])),
        "HardSigmoid": (2, _onnx_act("HardSigmoid", alpha=p[0], beta=p[1])),
        "Clip": (2, lambda x: np.clip(x, p[0], p[1])), "ScaledTanh": (2, lambda x: p[0] * np.tanh(p[1] * x)),
    }
    if name not in table:
        refuse(ctx, f"activation {name!r}; known: {', '.join(sorted(table))}")
    count, fn = table[name]
    if len(params) < count:
        refuse(ctx, f"activation {name} takes {count} parameters, the node gives {len(params)}")
    return fn


def _gemm_params(ctx: OpContext) -> list[float]:
    return [float(ctx.attrs[k]) for k in ("activation_alpha", "activation_beta", "activation_gamma")
            if k in ctx.attrs]


def _gemm_activation(ctx: OpContext) -> Callable[[np.ndarray], np.ndarray] | None:
    act = ctx.attrs.get("activation")
    return None if act is None else _activation(ctx, str(act), _gemm_params(ctx))


@register("FusedGemm", domain=DOMAIN, check=attr_check(_gemm_activation))
def fused_gemm(ctx: OpContext, a: np.ndarray, b: np.ndarray, c: np.ndarray | None = None) -> np.ndarray:
    """Gemm followed by an activation (activation_alpha/beta are its parameters)."""
    attrs: dict[str, Any] = {k: ctx.attrs[k] for k in ("alpha", "beta", "transA", "transB") if k in ctx.attrs}
    y = reuse(ctx, _onnx_gemm, OpContext("Gemm", attrs, 13, 1, ctx.name), *work(ctx, a, b, c))
    act = _gemm_activation(ctx)
    return (y if act is None else act(y)).astype(a.dtype)


_CONV_ATTRS = ("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides")


def _conv(ctx: OpContext, x: np.ndarray, w: np.ndarray, b: np.ndarray | None) -> np.ndarray:
    attrs: dict[str, Any] = {k: ctx.attrs[k] for k in _CONV_ATTRS if k in ctx.attrs}
    return reuse(ctx, _onnx_conv, OpContext("Conv", attrs, 11, 1, ctx.name), *work(ctx, x, w, b))


def _conv_activation(ctx: OpContext) -> Callable[[np.ndarray], np.ndarray] | None:
    act = ctx.attrs.get("activation")
    return _activation(ctx, str(act), [float(v) for v in ctx.attrs.get("activation_params", [])]) if act else None


@register("FusedConv", domain=DOMAIN, check=attr_check(_conv_activation))
def fused_conv(ctx: OpContext, x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None,
               z: np.ndarray | None = None) -> np.ndarray:
    """Conv (+ Z, a residual summed in) followed by an activation with ``activation_params``."""
    y = _conv(ctx, x, w, b)
    if z is not None:
        y = y + work(ctx, z)[0]
    act = _conv_activation(ctx)
    return (y if act is None else act(y)).astype(x.dtype)


@register("NhwcConv", domain=DOMAIN)
def nhwc_conv(ctx: OpContext, x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None) -> np.ndarray:
    """Conv on channels-last data: X is (N, spatial.., C), W is (M, kernel.., C/group)."""
    if x.ndim < 3 or w.ndim != x.ndim:
        refuse(ctx, f"input {x.shape} and weights {w.shape}; expected (N, spatial.., C) and (M, kernel.., C/group)")
    first = lambda t: np.moveaxis(t, -1, 1)  # noqa: E731  channels-last -> channels-first
    y = _conv(ctx, np.ascontiguousarray(first(x)), np.ascontiguousarray(first(w)), b)
    return np.ascontiguousarray(np.moveaxis(y, 1, -1)).astype(x.dtype)


@register("GemmFastGelu", domain=DOMAIN)
def gemm_fast_gelu(ctx: OpContext, x: np.ndarray, w: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
    """FastGelu(X @ W + bias): a projection and its activation in one kernel."""
    xw, ww = work(ctx, x, w)
    try:
        y = np.matmul(xw, ww)
    except ValueError:
        refuse(ctx, f"inputs {x.shape} and {w.shape} do not multiply")
    return fast_gelu(ctx, y.astype(x.dtype) if x.dtype == np.float16 else y, bias).astype(x.dtype)
