"""``ai.onnx.ml.ZipMap``, which skl2onnx and onnxmltools put after every classifier by default:
class scores [N, C] to a sequence of N maps, class label to score.

The maps are Python dicts with int (``classlabels_int64s``) or str (``classlabels_strings``)
keys and Python float values, the form onnxruntime hands back; like every container value
they live on the host, so the op is an AI CPU task (one element per score), as the
reference's container ops are.
"""

from __future__ import annotations

import numpy as np

from graphexec.kernels.cost import Cost
from graphexec.kernels.ml_common import ML
from graphexec.kernels.registry import OpContext, Unsupported, register


def _labels(ctx: OpContext) -> list[int | str]:
    ints, strings = ctx.attr("classlabels_int64s", None), ctx.attr("classlabels_strings", None)
    if (ints is None) == (strings is None):
        raise Unsupported("ZipMap needs exactly one of classlabels_int64s and classlabels_strings")
    return [int(i) for i in ints] if ints is not None else \
        [s.decode() if isinstance(s, bytes) else str(s) for s in strings]


def _cost(ins: list, outs: list, moved: float, attrs: dict) -> Cost:
    n = int(np.prod(ins[0])) if ins and ins[0] is not None else 1
    return Cost(float(n), moved, "aicpu", 1)


@register("ZipMap", domain=ML, cost=_cost)
def zipmap(ctx: OpContext, x: np.ndarray) -> list[dict[int | str, float]]:
    labels = _labels(ctx)
    if x.dtype != np.float32 or x.ndim not in (1, 2) or x.shape[-1] != len(labels):
        raise Unsupported(f"ZipMap: input {x.dtype}{list(x.shape)} for {len(labels)} class labels")
    rows = x.reshape(-1, len(labels)).tolist()   # Python floats of the float32 values, as onnxruntime gives
    return [dict(zip(labels, row)) for row in rows]
