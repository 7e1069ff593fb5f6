"""What the com.microsoft kernels share: dtype handling and their one-line refusals.

onnx's reference cannot run com.microsoft ops, so a case these kernels do not handle
has no fallback: it fails with an error naming the op and the node instead of raising
``Unsupported``.
"""

from __future__ import annotations

from functools import wraps
from typing import Any, Callable, NoReturn

import numpy as np

from graphexec.errors import UnsupportedOpError
from graphexec.ir import TensorType
from graphexec.kernels.registry import OpContext, Unsupported

DOMAIN = "com.microsoft"
_FLOATS = (np.float16, np.float32, np.float64)


# ORT's ops that it registers in the ONNX domain (version 1), which onnx leaves free
ONNX_DOMAIN_OPS = ("LayerNormalization", "SimplifiedLayerNormalization")


class Refused(UnsupportedOpError):
    """A node's case a kernel here does not support; ``why`` is the reason alone."""

    def __init__(self, message: str, why: str) -> None:
        super().__init__(message)
        self.why = why


def refuse(ctx: OpContext, why: str) -> NoReturn:
    """Fail the node: ``why`` says which input or attribute case is not supported."""
    domain = "ai.onnx" if ctx.op in ONNX_DOMAIN_OPS else DOMAIN
    raise Refused(f"node {ctx.name or '<unnamed>'} ({domain}::{ctx.op}): {why}", why)


def attr_check(*steps: Callable[[OpContext], Any]) -> Callable[[OpContext], str | None]:
    """A registration's ``check=``: runs ``steps``, the kernel's own attribute checks (which
    ``refuse``), at compile time; the reason of the first refusal, or None."""

    def check(ctx: OpContext) -> str | None:
        try:
            for step in steps:
                step(ctx)
        except Refused as e:
            return e.why
        return None

    return check


def need(ctx: OpContext, key: str) -> Any:
    """A required attribute, or the node's one-line error."""
    if key not in ctx.attrs:
        refuse(ctx, f"needs attribute {key!r}")
    return ctx.attrs[key]


def flag(ctx: OpContext, key: str, default: int = 0) -> bool:
    """An int attribute used as a switch; only 0 and 1 are meaningful."""
    v = int(ctx.attrs.get(key, default))
    if v not in (0, 1):
        refuse(ctx, f"attribute {key}={v}; expected 0 or 1")
    return bool(v)


def work(ctx: OpContext, *xs: np.ndarray | None) -> list[Any]:
    """The float inputs in their compute dtype: float16 (and float32) in float32, float64 as is."""
    out: list[Any] = []
    for x in xs:
        if x is None:
            out.append(None)
            continue
        if x.dtype.type not in _FLOATS:
            refuse(ctx, f"input dtype {x.dtype}; expected float16, float32 or float64")
        out.append(x.astype(np.float32) if x.dtype == np.float16 else x)
    return out


def ints(ctx: OpContext, x: np.ndarray, what: str) -> np.ndarray:
    """An index input (ids, positions, lengths) as int64."""
    if x.dtype.kind not in "iu":
        refuse(ctx, f"{what} has dtype {x.dtype}; expected an integer type")
    return x.astype(np.int64)


def reuse(ctx: OpContext, fn: Callable[..., Any], inner: OpContext, *args: Any, **kw: Any) -> Any:
    """Run an onnx kernel (``fn`` under ``inner``) for this node; its ``Unsupported`` becomes the node's error."""
    try:
        return fn(inner, *args, **kw)
    except Unsupported as e:
        refuse(ctx, str(e))


# --- for the shape rules (contrib_shapes.py) ----------------------------------------------------

T = TensorType | None   # an input's type; None where an optional input is omitted
Shape = tuple[int, ...]
Types = TensorType | list[TensorType]


def safe_rule(rule: Callable[..., Types]) -> Callable[..., Types]:
    """A shape rule that gives ``TensorType()`` (unknown) where the inputs do not fit it."""

    @wraps(rule)
    def safe(*ins: T, **attrs: Any) -> Types:
        try:
            return rule(*ins, **attrs)
        except (ValueError, IndexError, TypeError, KeyError, AttributeError, ZeroDivisionError, Unsupported):
            return TensorType()

    return safe


def static(t: T) -> Shape:
    """The static shape of a present input (rules run on static inputs only)."""
    if t is None or t.shape is None:
        raise ValueError("input omitted")
    return tuple(int(d) for d in t.shape)  # type: ignore[arg-type]


def like(x: TensorType, shape: Shape | None = None) -> TensorType:
    """``x``'s dtype with ``shape`` (x's own by default)."""
    return TensorType(x.dtype, static(x) if shape is None else shape)
