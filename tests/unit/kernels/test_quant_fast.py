"""QuantizeLinear's scratch quotient and cast into ``out``, and DequantizeLinear's steps in
``out``, against the plain steps (fresh arrays, the formulas as they were) bit for bit, over
shapes, per-tensor and per-axis parameters and edge values (inf, NaN, +-0, subnormals)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from graphexec.kernels import quant
from graphexec.kernels.registry import OpContext

_F32 = np.dtype(np.float32)
_EDGES = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1.2e-38, 3e38, -3e38, 0.5, 1.5, -2.5,
                   127.5, -128.5, 255.5], np.float32)
_SHAPES = st.lists(st.integers(1, 6), min_size=1, max_size=4).map(tuple)


def _x(shape: tuple[int, ...], seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * 10.0 ** rng.integers(-3, 4, shape)).astype(np.float32)
    flat = x.reshape(-1)
    flat[rng.integers(0, flat.size, max(1, flat.size // 4))] = rng.choice(_EDGES, max(1, flat.size // 4))
    return x


def _params(shape, per_axis, seed, dtype):
    """(scale, zero point, attrs): per tensor, or per axis 0 (a channel each)."""
    rng = np.random.default_rng(seed + 1)
    n = shape[0] if per_axis else 1
    scale = rng.choice(np.array([1e-3, 0.02, 0.5, 3.0, 1e-40, 7e-39], np.float32), n).astype(np.float32)
    info = np.iinfo(dtype)
    zp = rng.integers(info.min, info.max, n, endpoint=True).astype(dtype)
    if not per_axis:
        return scale.reshape(()), zp.reshape(()), {}
    return scale, zp, {"axis": 0}


@settings(max_examples=80, deadline=None)
@given(_SHAPES, st.booleans(), st.sampled_from([np.int8, np.uint8]), st.booleans(), st.integers(0, 2**31))
def test_quantize_into_out_has_the_plain_bits(shape, per_axis, dtype, with_zp, seed):
    x = _x(shape, seed)
    scale, zp, attrs = _params(shape, per_axis, seed, dtype)
    ctx = OpContext("QuantizeLinear", attrs, const_inputs=(False, True, True))
    zpi = zp if with_zp else None
    s = quant.expand_param(scale, x.shape, attrs.get("axis", 1)).astype(_F32)
    z = None if zpi is None else quant.expand_param(zpi, x.shape, attrs.get("axis", 1)).astype(_F32)
    with np.errstate(all="ignore"):   # the plain steps: a fresh quotient, astype at the end
        want = quant.quantize((x / s).astype(_F32, copy=False), np.dtype(dtype) if with_zp else np.dtype(np.uint8),
                              z, True, inplace=True)
    out = np.empty(x.shape, want.dtype)
    got = quant.quantize_linear(ctx, x, scale, zpi, out=out)
    assert got is out and got.tobytes() == want.tobytes()
    fresh = quant.quantize_linear(ctx, x, scale, zpi)
    assert fresh.dtype == want.dtype and fresh.tobytes() == want.tobytes()


@settings(max_examples=80, deadline=None)
@given(_SHAPES, st.booleans(), st.sampled_from([np.int8, np.uint8, np.int32]), st.booleans(), st.integers(0, 2**31))
def test_dequantize_into_out_has_the_plain_bits(shape, per_axis, dtype, with_zp, seed):
    rng = np.random.default_rng(seed)
    info = np.iinfo(dtype)
    x = rng.integers(info.min, info.max, shape, endpoint=True).astype(dtype)
    scale, zp, attrs = _params(shape, per_axis, seed, np.int8 if dtype == np.int32 else dtype)
    scale = scale.copy()
    scale.reshape(-1)[0] = rng.choice(_EDGES)   # inf, NaN, subnormal and signed-zero scales too
    zpi = zp.astype(dtype) if with_zp and dtype != np.int32 else None
    ctx = OpContext("DequantizeLinear", attrs, const_inputs=(False, True, True))
    with np.errstate(all="ignore"):
        want = quant.dequantize_linear(ctx, x, scale, zpi)
        out = np.empty(x.shape, _F32)
        got = quant.dequantize_linear(ctx, x, scale, zpi, out=out)
    assert got is out and got.tobytes() == want.tobytes()


def test_a_misfit_out_is_left_alone():
    x = np.linspace(-3, 3, 24, dtype=np.float32).reshape(2, 3, 4)
    ctx = OpContext("QuantizeLinear")
    wrong = np.zeros((2, 3, 5), np.uint8)
    got = quant.quantize_linear(ctx, x, np.array(0.1, np.float32), np.array(3, np.uint8), out=wrong)
    assert got is not wrong and not wrong.any() and got.shape == x.shape
    dq = quant.dequantize_linear(OpContext("DequantizeLinear"), got, np.array(0.1, np.float32),
                                 np.array(3, np.uint8), out=np.zeros((2, 3, 4), np.float64))
    assert dq.dtype == _F32 and dq.shape == x.shape
