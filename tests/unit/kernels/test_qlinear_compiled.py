"""The compiled one-pass QuantizeLinear/DequantizeLinear (``kernels/_qlinear.c``) give the
bytes of numpy's passes (the plain path): random tensors with NaN, +-inf, ties at .5,
huge and subnormal values; uint8 and int8; scales of 0, inf, NaN and subnormal; with and
without a zero point; into the output's bytes or a new array."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graphexec import _switch
from graphexec.kernels import quant
from graphexec.kernels.registry import OpContext

pytestmark = pytest.mark.skipif(quant._qlinear is None, reason="_qlinear.c not built")

_EDGES = np.array([0.0, -0.0, 0.5, -0.5, 1.5, -2.5, 127.5, -128.5, 255.5, np.nan, np.inf, -np.inf, 1e-45, 3e38,
                   -3e38], np.float32)


def _ctx(op: str) -> OpContext:
    return OpContext(op=op, attrs={}, opset=21, const_inputs=(False, True, True))


def _both(fn, *args):
    with np.errstate(all="ignore"):
        fast = fn(*args)
        with _switch.plain():
            plain = fn(*args)
    return fast, plain


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 300), st.sampled_from([np.uint8, np.int8]),
       st.sampled_from([0.02, 1.0, 0.0, np.inf, np.nan, 1e-40, 3.0e-3]), st.booleans(), st.booleans(),
       st.integers(0, 2**31))
def test_quantize_and_dequantize_give_numpys_bytes(n, dtype, scale, with_zp, into, seed):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(n) * 10.0 ** rng.integers(-2, 4, n)).astype(np.float32)
    k = int(rng.integers(0, n // 3 + 2))
    x[rng.integers(0, n, k)] = rng.choice(_EDGES, k)
    s = np.asarray(np.float32(scale))
    zp = np.asarray(rng.integers(*((0, 256) if dtype == np.uint8 else (-128, 128))), dtype) if with_zp else None
    qtype = dtype if with_zp else np.uint8   # no zero point: uint8
    out = np.full(n, 7, qtype) if into else None
    fast, plain = _both(lambda: quant.quantize_linear(_ctx("QuantizeLinear"), x, s, zp, out=None if out is None
                                                      else out.copy()))
    assert fast.dtype == plain.dtype == qtype and fast.tobytes() == plain.tobytes()
    q = rng.integers(0, 256, n).astype(np.uint8).view(dtype)
    fout = np.full(n, 7, np.float32) if into else None
    fast, plain = _both(lambda: quant.dequantize_linear(_ctx("DequantizeLinear"), q, s, zp, out=None if fout is None
                                                        else fout.copy()))
    assert fast.dtype == plain.dtype == np.float32 and fast.tobytes() == plain.tobytes()


def test_it_runs_where_it_should():
    calls = []
    real = quant._qlinear

    class Spy:
        def quantize(self, *a):
            calls.append("q")
            real.quantize(*a)

        def dequantize(self, *a):
            calls.append("dq")
            real.dequantize(*a)

    x = np.linspace(-3, 3, 64, dtype=np.float32).reshape(4, 16)
    s, zp = np.asarray(np.float32(0.05)), np.asarray(np.uint8(128))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(quant, "_qlinear", Spy())
        q = quant.quantize_linear(_ctx("QuantizeLinear"), x, s, zp)
        quant.dequantize_linear(_ctx("DequantizeLinear"), q, s, zp)
        quant.quantize_linear(_ctx("QuantizeLinear"), x[:, ::2], s, zp)          # not contiguous: numpy
        per_axis = _ctx("QuantizeLinear")
        per_axis.attrs["axis"] = 0
        quant.quantize_linear(per_axis, x, np.full(4, 0.05, np.float32), np.full(4, 128, np.uint8))   # numpy
    assert calls == ["q", "dq"]
