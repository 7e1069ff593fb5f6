"""Variadic elementwise kernels (Max, Min, Sum, Mean), selection (Where), predicates
(IsNaN, IsInf) and Cast, on the helpers of ``elementwise.py``."""

from __future__ import annotations

from functools import reduce
from typing import Any

import numpy as np
from onnx import TensorProto, helper

from graphexec.kernels.elementwise import _check, _into, _kernel
from graphexec.kernels.registry import OpContext, Unsupported


# ---------------------------------------------------------------- variadic
def _variadic(op: str, f: Any, kinds: str, mean: bool = False) -> None:
    @_kernel(op, out=not mean)
    def k(ctx: OpContext, *xs: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        xs = tuple(x for x in xs if x is not None)
        if not xs:
            raise Unsupported(f"{op}: no inputs")
        _check(op, kinds, *xs)
        into = None if mean or len(xs) < 2 else _into(out, xs[0].dtype, *xs)
        if into is not None:   # accumulate in the output's bytes
            f(xs[0], xs[1], out=into)
            for x in xs[2:]:
                f(into, x, out=into)
            return into
        res = reduce(f, xs) if len(xs) > 1 else xs[0].copy()
        return (res / len(xs)).astype(xs[0].dtype, copy=False) if mean else res


_variadic("Max", np.maximum, "iuf")
_variadic("Min", np.minimum, "iuf")
_variadic("Sum", np.add, "f")
_variadic("Mean", np.add, "f", mean=True)


# ---------------------------------------------------------------- selection, predicates, Cast
@_kernel("Where", since=9)
def where(ctx: OpContext, cond: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    _check("Where", "b", cond)
    _check("Where", "biufcOU", x, y)
    return np.where(cond, x, y)


@_kernel("IsNaN", since=9)
def isnan(ctx: OpContext, x: np.ndarray) -> np.ndarray:
    _check("IsNaN", "f", x)
    return np.isnan(x)


@_kernel("IsInf", since=10)
def isinf(ctx: OpContext, x: np.ndarray) -> np.ndarray:
    _check("IsInf", "f", x)
    neg, pos = ctx.attr("detect_negative", 1), ctx.attr("detect_positive", 1)
    if neg and pos:
        return np.isinf(x)
    if neg:
        return np.isneginf(x)
    return np.isposinf(x) if pos else np.zeros(x.shape, dtype=bool)


_CAST_TARGETS = {TensorProto.BOOL, TensorProto.INT8, TensorProto.INT16, TensorProto.INT32, TensorProto.INT64,
                 TensorProto.UINT8, TensorProto.UINT16, TensorProto.UINT32, TensorProto.UINT64,
                 TensorProto.FLOAT16, TensorProto.FLOAT, TensorProto.DOUBLE}


@_kernel("Cast")
def cast(ctx: OpContext, x: np.ndarray) -> np.ndarray:
    """Plain numeric/bool casts only; numpy's astype is the reference's own semantics."""
    to = ctx.attr("to")
    if isinstance(to, str):  # opset 1 spelled the type name
        to = TensorProto.DataType.Value(to.upper())
    if to not in _CAST_TARGETS:
        raise Unsupported(f"Cast: target type {to}")
    _check("Cast", "biuf", x)
    return x.astype(helper.tensor_dtype_to_np_dtype(to), copy=False)
