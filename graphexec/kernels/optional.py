"""Optional, OptionalHasElement, OptionalGetElement: an optional value is the value itself or
None, as onnxruntime hands it over and takes it in.

onnx.reference's Optional wraps its value in a list (``[x]``) that its OptionalGetElement hands
on unwrapped, so an Optional followed by OptionalGetElement gave ``[x]`` where x was meant, and
a graph's optional output came back as a list. Host values: AI CPU tasks, costed as the
fallback costs them (elements of the output, bytes moved).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from graphexec.kernels.cost import Cost
from graphexec.kernels.registry import OpContext, Unsupported, register


def _cost(ins: list, outs: list, moved: float, attrs: dict) -> Cost:
    out = outs[0] if outs and outs[0] is not None else ()
    return Cost(float(np.prod(out, dtype=np.int64)) if out else 1.0, moved, "aicpu", 1)


@register("Optional", since=15, cost=_cost)
def optional(ctx: OpContext, x: Any = None) -> Any:
    return x


@register("OptionalHasElement", since=15, cost=_cost)
def optional_has_element(ctx: OpContext, x: Any = None) -> np.ndarray:
    return np.array(x is not None)


@register("OptionalGetElement", since=15, cost=_cost)
def optional_get_element(ctx: OpContext, x: Any = None) -> Any:
    if x is None:
        raise Unsupported("OptionalGetElement: the optional input has no value")
    return x
