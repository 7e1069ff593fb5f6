"""com.microsoft QLinearWhere: Where on 8-bit tensors, which onnxruntime's static quantizer
writes (QOperator format) for a Where whose branches are quantized, such as a BERT's masks.

Each branch is requantized to Z's scale and zero point through a 256-entry table,
``rint((v - zp)·scale / z_scale) + z_zp`` saturated, as onnxruntime builds it (MLAS divides by
the output scale, then rounds half to even); the condition then picks per element, with
numpy broadcasting. The tables are cached per node and set of parameters.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from graphexec.ir import TensorType
from graphexec.kernels.contrib_util import DOMAIN, refuse
from graphexec.kernels.custom import CustomKernel
from graphexec.kernels.quant import quantize
from graphexec.kernels.registry import OpContext, register

_F32 = np.dtype(np.float32)
_INT8 = (np.dtype(np.int8), np.dtype(np.uint8))


def _where_type(cond: TensorType, x: TensorType, x_s: TensorType, x_zp: TensorType, y: TensorType,
                y_s: TensorType, y_zp: TensorType, z_s: TensorType, z_zp: TensorType, **attrs: Any) -> list[TensorType]:
    """Z: the broadcast shape of condition, X and Y, in the zero points' 8-bit type."""
    try:
        shapes = [tuple(int(d) for d in t.shape) for t in (cond, x, y) if t.shape is not None]  # type: ignore[arg-type]
        return [TensorType(z_zp.dtype, np.broadcast_shapes(*shapes))] if len(shapes) == 3 else [TensorType()]
    except (ValueError, TypeError, AttributeError):
        return [TensorType()]


def _scalar(ctx: OpContext, p: np.ndarray, what: str) -> float:
    if p.size != 1:
        refuse(ctx, f"{what} of shape {p.shape}; expected a scalar (per-tensor quantization)")
    return float(p.reshape(()))


def _requantized(ctx: OpContext, v: np.ndarray, s: np.ndarray, zp: np.ndarray, z_s: np.ndarray,
                 z_zp: np.ndarray, what: str) -> np.ndarray:
    """``v`` at Z's scale and zero point, by a 256-entry lookup table built once per parameters."""
    if v.dtype != z_zp.dtype or zp.dtype != z_zp.dtype:
        refuse(ctx, f"{what} {v.dtype} with zero point {zp.dtype}; expected Z's zero point type {z_zp.dtype}")
    if s.dtype != _F32 or z_s.dtype != _F32:
        refuse(ctx, f"{what}_scale {s.dtype} and z_scale {z_s.dtype}; expected float32")
    params = (v.dtype.str, _scalar(ctx, s, f"{what}_scale"), _scalar(ctx, zp, f"{what}_zero_point"),
              _scalar(ctx, z_s, "z_scale"), _scalar(ctx, z_zp, "z_zero_point"))
    table = ctx.cache.get(params)
    if table is None:
        byte = np.arange(256, dtype=np.uint8).view(v.dtype)
        deq = (byte.astype(_F32) - zp.astype(_F32).reshape(())) * s.astype(_F32).reshape(())
        with np.errstate(all="ignore"):
            table = ctx.cache[params] = quantize(deq / z_s.astype(_F32).reshape(()), v.dtype,
                                                 z_zp.astype(_F32).reshape(()))
    return table[v.view(np.uint8)]


def qlinear_where(ctx: OpContext, cond: np.ndarray, x: np.ndarray, x_s: np.ndarray, x_zp: np.ndarray, y: np.ndarray,
                  y_s: np.ndarray, y_zp: np.ndarray, z_s: np.ndarray, z_zp: np.ndarray) -> np.ndarray:
    """Z = where(condition, requantize(X), requantize(Y)) at Z's scale and zero point."""
    if cond.dtype != np.bool_ or z_zp.dtype not in _INT8:
        refuse(ctx, f"condition {cond.dtype} and z_zero_point {z_zp.dtype}; expected bool and int8/uint8")
    xq = _requantized(ctx, x, x_s, x_zp, z_s, z_zp, "x")
    yq = _requantized(ctx, y, y_s, y_zp, z_s, z_zp, "y")
    return np.where(cond, xq, yq)


register("QLinearWhere", domain=DOMAIN,
         rules=CustomKernel("QLinearWhere", DOMAIN, qlinear_where, _where_type, None, positional=True))(qlinear_where)
