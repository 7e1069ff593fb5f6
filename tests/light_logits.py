"""The light models' softmax outputs, judged by what float32 can promise about them.

Eight of the nine light models end in a Softmax over logits that their constant weights drive to
1e9-1e31 (squeezenet 9.5e9, alexnet 3.6e12, resnet50 1.3e19, vgg19 3.7e31), where float32's
spacing is 1e3-1e24: the recorded output (0.001 in every class) holds only while every class's
logit rounds to the same value, which one GEMM kernel's edge tile can break (OpenBLAS's Haswell
kernel on one thread turns squeezenet's output one-hot). So for a model that ends in Softmax the
tests compare its logits (the model cut before the Softmax) within the accumulating tolerance, check
that the output is a distribution, and compare the output itself only where the logits are small
enough for float32 to determine it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx

import graphexec as gx

DETERMINED_SPACING = 2.0 ** -10   # float32's spacing at the logits' peak at most this: the output is determined


def logits_model(path: str | Path) -> onnx.ModelProto | None:
    """The model cut before its final Softmax, its logits the one output; None when the model's
    one output is not a Softmax's."""
    model = onnx.load(str(path))
    last = model.graph.node[-1]
    if last.op_type != "Softmax" or len(model.graph.output) != 1 or model.graph.output[0].name != last.output[0]:
        return None
    elem = model.graph.output[0].type.tensor_type.elem_type
    del model.graph.node[-1]
    del model.graph.output[:]
    model.graph.output.append(onnx.helper.make_tensor_value_info(last.input[0], elem, None))
    return model


def logits(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> np.ndarray:
    """graphexec's logits for the feeds, on one stream."""
    return next(iter(gx.Session(model, streams=1).run(feeds).outputs.values()))


def determined(reference_logits: np.ndarray) -> bool:
    """Whether float32 determines a softmax of these logits to within its own tolerances."""
    peak = np.float32(np.abs(reference_logits).max())
    return bool(np.spacing(peak) <= DETERMINED_SPACING)


def distribution_problem(probs: Any, axis: int = 1) -> str | None:
    """None when ``probs`` is a probability distribution along ``axis`` (finite, in [0, 1],
    summing to 1 within float32's rounding over the axis), else what is wrong."""
    p = np.asarray(probs, dtype=np.float64)
    if not np.isfinite(p).all() or (p < 0).any() or (p > 1).any():
        return "softmax output is not finite in [0, 1]"
    total = p.sum(axis=axis)
    tol = 4 * p.shape[axis] * float(np.finfo(np.float32).eps)
    return None if np.all(np.abs(total - 1) <= tol) else f"softmax output sums to {total.ravel()[:3]}, not 1"


def light_graph(path: str | Path) -> gx.Graph:
    """The light model as graphexec loads it, cut before its final Softmax where it ends in one:
    what tests compare across configurations (cards, batches, BLAS kernels) within a tolerance."""
    cut = logits_model(path)
    return gx.load(cut if cut is not None else str(path))


def differences(got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> dict[str, str]:
    """Each output of ``got`` outside the accumulating tolerance of ``want`` (golden_compare),
    with why: a batch split across cards changes the GEMMs' shapes, so their roundings."""
    import golden_compare

    out = {k: "missing" for k in want if k not in got}
    for k, v in got.items():
        why = golden_compare.close(np.asarray(v), np.asarray(want[k]), str(np.asarray(v).dtype),
                                   golden_compare.ACCUMULATE) if k in want else "unexpected"
        if why:
            out[k] = why
    return out
