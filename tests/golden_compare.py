"""How the golden tests compare graphexec's outputs with an outside oracle's (``golden_oracle``):
exactly where exactness is promised, within a stated tolerance where arithmetic may move a result
by a rounding.

What may move, and why: in graphexec, a GEMM's summation order follows the BLAS build's kernel
(OpenBLAS picks Haswell, SkylakeX, Zen or generic kernels by CPU, or by ``OPENBLAS_CORETYPE``) and
its thread count, and numpy's transcendental loops follow the CPU's SIMD width; nothing else in
graphexec does. In the oracle, its own arithmetic: onnx's expected values computed in float64,
onnxruntime's MLAS kernels and fused ops.

The tolerances, per output dtype and per op family of the model:

- bool, strings and integers: exact; but in a quantizing model (QuantizeLinear, QLinear*,
  *Integer, DynamicQuantize*...), an integer output of 8 bits or fewer may differ by
  ``QUANT_STEPS`` quantization step (a float that rounds to the other side of a step).
- floats, ``|got - ref| <= ulps * eps(dtype) * scale + tiny(dtype)``, NaN where the reference is
  NaN and infinities equal:
  - elementwise family (no accumulating op in the model): scale is ``|ref|`` plus half the
    tensor's largest magnitude, ``ulps`` 16: 16 ulps of each value and 8 of the peak. The
    references are outside oracles (``golden_oracle``), and one that works in float64 and rounds
    once (onnx's expected values for pools, normalizations, windows) differs from float32 work
    that rounds at each step by a few roundings of the operands, which the peak stands for, most
    where the result cancels to near zero: measured at most 3.7 ulps of the peak over the node
    tests (test_averagepool_3d_dilations_large_count_include_pad_is_0_ceil_mode_is_False);
  - accumulating family (MatMul, Gemm, Conv, Einsum, attention, recurrent cells...): scale is the
    tensor's largest magnitude (a GEMM's rounding error is relative to its operands, not to an
    output that cancels to near zero), ``ulps`` 512;
  - for dtypes of 11 or fewer mantissa bits (float16, bfloat16, float8, float4) the counts are
    4 and 16: their results are rounded from float32 work, so they move by a step at most.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np
import onnx

ACCUMULATING = frozenset({
    "MatMul", "Gemm", "Conv", "ConvTranspose", "Einsum", "Attention", "MultiHeadAttention", "LSTM", "GRU",
    "RNN", "MatMulInteger", "ConvInteger", "QLinearMatMul", "QLinearConv", "FusedMatMul", "QAttention",
    "GroupQueryAttention", "MatMulNBits", "DynamicQuantizeMatMul", "MatMulIntegerToFloat", "QGemm",
    "SkipLayerNormalization", "EmbedLayerNormalization", "DFT", "STFT", "MelWeightMatrix", "Scan", "Loop",
    "DeformConv", "RotaryEmbedding", "BiasGelu", "FastGelu", "QuickGelu",
})
QUANTIZING = frozenset({
    "QuantizeLinear", "DynamicQuantizeLinear", "QLinearMatMul", "QLinearConv", "MatMulInteger", "ConvInteger",
    "QLinearAdd", "QLinearMul", "QLinearSigmoid", "QLinearLeakyRelu", "QLinearAveragePool", "QLinearConcat",
    "QLinearGlobalAveragePool", "QLinearSoftmax", "QGemm", "QAttention", "DynamicQuantizeMatMul",
})
QUANT_STEPS = 1
LOW_PRECISION_EPS = 2.0 ** -10   # float16's eps: at or above it, the small step counts apply
PEAK_SHARE = 2.0 ** -1   # the elementwise family's share of the tensor's peak in its scale


@dataclass(frozen=True)
class Family:
    """A model's op family: how far its float outputs may move, and its integers."""

    name: str
    ulps: int
    low_ulps: int
    normwise: bool
    int_steps: int


ELEMENTWISE = Family("elementwise", ulps=16, low_ulps=4, normwise=False, int_steps=0)
ACCUMULATE = Family("accumulating", ulps=512, low_ulps=16, normwise=True, int_steps=0)


def _op_types(graph: onnx.GraphProto) -> set[str]:
    ops: set[str] = set()
    for node in graph.node:
        ops.add(node.op_type)
        for attr in node.attribute:
            for sub in [attr.g] if attr.HasField("g") else list(attr.graphs):
                ops |= _op_types(sub)
    return ops


def family_of(model: Any) -> Family:
    """The family of a model (a path or a ModelProto), from every op in it and its functions."""
    proto = onnx.load(str(model)) if not isinstance(model, onnx.ModelProto) else model
    ops = _op_types(proto.graph)
    for fn in proto.functions:
        ops |= {n.op_type for n in fn.node}
    base = ACCUMULATE if ops & ACCUMULATING else ELEMENTWISE
    steps = QUANT_STEPS if ops & QUANTIZING else 0
    return Family(base.name + ("+quantized" if steps else ""), base.ulps, base.low_ulps, base.normwise, steps)


def _hex(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=repr).encode()).hexdigest()[:16]


def _storable(a: np.ndarray) -> np.ndarray | None:
    """The array in numpy's own dtypes (which compare, widen and write to JSON), holding every
    value exactly; None where only a digest will do (object arrays of anything but strings)."""
    if a.dtype == object:
        items = a.tolist() if a.ndim else [a.item()]
        return np.asarray(a.tolist(), dtype=str) if all(isinstance(x, str) for x in np.ravel(items)) else None
    if _native(a.dtype):
        return a
    info = _ml_info(a.dtype)   # ml_dtypes: bfloat16, float8/4 (exact in float32), int4/int2
    if isinstance(info, ml_dtypes.iinfo):
        return a.astype(np.int8 if info.min < 0 else np.uint8)
    return a.astype(np.float32) if info is not None else None


def _native(dtype: np.dtype) -> bool:
    """numpy's own dtypes; ml_dtypes' types have a descriptor (``<f1``, ``<V2``) that reads
    back as another type or not at all, and numpy's ufuncs do not all take them."""
    try:
        return dtype.kind in "biufcUS" and np.dtype(dtype.str) == dtype
    except TypeError:
        return False


def _ml_info(dtype: np.dtype) -> Any:
    for make in (ml_dtypes.finfo, ml_dtypes.iinfo):
        try:
            return make(dtype)
        except (ValueError, TypeError):
            continue
    return None


def flatten(outputs: dict[str, Any]) -> tuple[list[Any], dict[str, tuple[str, np.ndarray]]]:
    """(meta, arrays): meta is compared exactly (each output's name, dtype and shape, or a digest
    of what cannot be kept as an array); arrays maps an output (a sequence's items apart) to its
    dtype's name and its values in numpy's own dtypes, compared with a tolerance."""
    meta: list[Any] = []
    arrays: dict[str, tuple[str, np.ndarray]] = {}
    for name, value in outputs.items():
        items = list(enumerate(value)) if isinstance(value, (list, tuple)) else [(None, value)]
        meta.append([name, "sequence", len(items)] if isinstance(value, (list, tuple)) else [name])
        for i, item in items:
            key = name if i is None else f"{name}[{i}]"
            kept = _storable(item) if isinstance(item, np.ndarray) else None
            if kept is None:
                meta.append([key, "digest", _hex(repr(item))])
            else:
                meta.append([key, str(item.dtype), list(item.shape)])
                arrays[key] = (str(item.dtype), kept)
    return meta, arrays


def _eps_tiny(dtype_name: str) -> tuple[float, float] | None:
    try:
        info: Any = np.finfo(np.dtype(dtype_name))
    except (TypeError, ValueError):
        info = _ml_info(np.dtype(getattr(ml_dtypes, dtype_name, dtype_name)))
    if not hasattr(info, "eps"):
        return None
    return float(info.eps), float(getattr(info, "smallest_normal", info.tiny))


def close(got: np.ndarray, ref: np.ndarray, dtype_name: str, family: Family) -> str | None:
    """None when ``got`` is within the family's tolerance of ``ref``, else what differs."""
    if got.shape != ref.shape:
        return f"shape {got.shape} != expected {ref.shape}"
    fp = None if ref.dtype.kind in "biuUS" else _eps_tiny(dtype_name)
    if fp is None:
        return _close_exact(got, ref, family, dtype_name)
    wide = np.complex128 if ref.dtype.kind == "c" else np.float64
    g, r = got.astype(wide), ref.astype(wide)
    if not np.array_equal(np.isnan(g), np.isnan(r)):
        return "NaN positions differ"
    if not np.array_equal(g[np.isinf(r)], r[np.isinf(r)]) or np.isinf(g[~np.isinf(r)]).any():
        return "infinities differ"
    finite = np.isfinite(r)
    g, r = g[finite], r[finite]
    if r.size == 0:
        return None
    eps, tiny = fp
    ulps = family.low_ulps if eps >= LOW_PRECISION_EPS else family.ulps
    peak = float(np.abs(r).max())
    scale = np.full(r.shape, peak) if family.normwise else np.abs(r) + peak * PEAK_SHARE
    err = np.abs(g - r)
    bad = err > ulps * eps * scale + tiny
    if bad.any():
        i = int(np.argmax(err - ulps * eps * scale))
        return (f"{int(bad.sum())} of {r.size} values past {ulps} ulps ({family.name}): "
                f"got {g[i]!r}, expected {r[i]!r}")
    return None


def _close_exact(got: np.ndarray, ref: np.ndarray, family: Family, dtype_name: str) -> str | None:
    small_int = ref.dtype.kind in "iu" and ref.dtype.itemsize == 1
    if family.int_steps and small_int:
        diff = np.abs(got.astype(np.int64) - ref.astype(np.int64))
        return None if diff.max(initial=0) <= family.int_steps else f"{dtype_name}: off by {diff.max()} steps"
    return None if np.array_equal(got, ref) else f"{dtype_name}: values differ (compared exactly)"


def mismatches(got: dict[str, tuple[str, np.ndarray]], ref: dict[str, np.ndarray], family: Family) -> dict[str, str]:
    """Each output of ``got`` that is missing from ``ref`` or outside the tolerance, with why."""
    out = {}
    for key, (dtype_name, values) in got.items():
        why = close(values, ref[key], dtype_name, family) if key in ref else "not among the oracle's outputs"
        if why:
            out[key] = why
    return out
