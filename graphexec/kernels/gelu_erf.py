"""The exact (erf) Gelu of float16/float32 inputs, computed in float64 a piece at a time.

The formula is the one the recorded outputs were made with (``_gelu_erf_whole``: a float64
Numerical Recipes erfc, then one rounding to the output dtype), so its bits are kept. A float32
formula was 10x faster but changed 54% of the outputs and lost the negative tail, so the
speed comes instead from where the work happens: the whole-tensor version makes about 30
passes over float64 temporaries 2x the input's size (MiniLM's 128x1536 BiasGelu: 1.5 MiB
each, out of L2, and fresh from mmap, a page fault per 4 KiB); here every pass runs on a
piece of ``BLOCK`` elements in per-thread scratch that stays in L2, and a piece's result is
rounded straight into the output (128x1536: about 3.5x faster; 32x1536 is unchanged). Each element goes
through the very same float64 operations in the same order (numpy's elementwise loops,
exp included, compute an element the same wherever it sits in an array), so the result is
bit-identical; tests compare the two with ``np.array_equal``.

That float64 path is the plain one (``GRAPHEXEC_PLAIN``). A float32 result is computed by the
same formula in float32 (``_piece32``): 3x faster (MiniLM's 32x1536 BiasGelu 794 -> 263 us),
within 7 float32 ulps of the float64 path over [-12, 12] measured against |y| + 2**-10 of the
largest |y| (the golden tolerance for elementwise ops is 16), and the negative tail keeps its
relative accuracy (see ``_piece32``), which a 1 + erf form loses.
"""

from __future__ import annotations

import math

import numpy as np

from graphexec import _switch
from graphexec.kernels import scratch, vmath

BLOCK = 16384   # float64 elements per piece of a big tensor: five 128 KiB temporaries stay in L2
WHOLE = 65536   # up to this many elements, one piece (splitting a small tensor only adds calls)

_ERFC = (0.17087277, -0.82215223, 1.48851587, -1.13520398, 0.27886807,
         -0.18628806, 0.09678418, 0.37409196, 1.00002368, -1.26551223)


def erfc_nonneg(a: np.ndarray) -> np.ndarray:
    """erfc of float64 ``a >= 0``, fractional error < 1.2e-7 (Numerical Recipes erfcc), in a
    new array; relative accuracy in the tail keeps Gelu of large negative inputs accurate."""
    t = a * 0.5
    t += 1.0
    np.reciprocal(t, out=t)
    p = t * _ERFC[0]
    p += _ERFC[1]
    for c in _ERFC[2:]:
        p *= t
        p += c
    p -= a * a
    np.exp(p, out=p)
    p *= t
    return p


def gelu_erf_whole(x: np.ndarray) -> np.ndarray:
    """x Phi(x), Phi(x) = 1 - erfc(x/sqrt2)/2 for x > 0, erfc(-x/sqrt2)/2 otherwise: as one
    formula, |step(x) - erfc(|x|/sqrt2)/2| (no select: numpy's where on a mixed mask costs more
    than the rest). float64 needs full precision: math.erfc per element; narrower floats use
    the fast approximation in float64. The result is float64, in a new array."""
    xd = x.astype(np.float64)
    if x.dtype == np.float64:   # frompyfunc gives an object array
        e = np.asarray(np.frompyfunc(math.erfc, 1, 1)(-xd / math.sqrt(2)), dtype=np.float64)
        return 0.5 * xd * e
    a = np.abs(xd)
    a *= 1 / math.sqrt(2)
    h = erfc_nonneg(a)
    h *= -0.5
    h += np.greater(xd, 0.0, out=a)   # a is free again: the step as 0.0 / 1.0
    np.abs(h, out=h)
    h *= xd
    return h


def _piece(x: np.ndarray, out: np.ndarray, tmp: list[np.ndarray]) -> None:
    """``out[:] = gelu_erf_whole(x)`` rounded to out's dtype, for one 1-D piece, in the
    scratch ``tmp`` (five float64 arrays at least as long): the same operations in the
    same order, each into a buffer instead of a fresh array."""
    n = x.shape[0]
    xd, a, t, p, s = (b[:n] for b in tmp)
    np.copyto(xd, x)                     # x.astype(float64)
    np.abs(xd, out=a)
    a *= 1 / math.sqrt(2)
    np.multiply(a, 0.5, out=t)           # erfc_nonneg(a)
    t += 1.0
    np.reciprocal(t, out=t)
    np.multiply(t, _ERFC[0], out=p)
    p += _ERFC[1]
    for c in _ERFC[2:]:
        p *= t
        p += c
    np.multiply(a, a, out=s)
    p -= s
    np.exp(p, out=p)
    p *= t                               # h = erfc_nonneg(a)
    p *= -0.5
    p += np.greater(xd, 0.0, out=a)
    np.abs(p, out=p)
    p *= xd
    np.copyto(out, p, casting="same_kind")   # one rounding, as astype(out.dtype)


_F32 = np.dtype(np.float32)
_ERFC32 = tuple(np.float32(c) for c in _ERFC)
_HALF32, _ONE32, _ROOT32 = np.float32(0.5), np.float32(1.0), np.float32(1 / math.sqrt(2))
_CAP32, _HIGH_BITS = np.float32(16.0), np.int32(~0xFFF)


def _piece32(x: np.ndarray, out: np.ndarray, tmp: list[np.ndarray]) -> None:
    """``_piece``'s formula in float32, for a float32 piece into a float32 ``out``. Its
    exp(poly(t) - a**2), a = |x|/sqrt2, is exp(-h**2/2) * exp(poly(t) - (|x| - h)(|x| + h)/2),
    h being |x| with the low 12 bits of its mantissa cleared: h**2/2 is exact and the second
    exponent is small, so the tail keeps float32's relative accuracy (exp of a**2 rounded in
    float32 is off by up to 1e-5 at x = -11.5). |x| is capped at 16 there (erfc underflows)."""
    n = x.shape[0]
    a, t, p, s, h = (b[:n] for b in tmp[:5])
    np.abs(x, out=h)
    np.multiply(h, _ROOT32, out=a)
    np.multiply(a, _HALF32, out=t)
    t += _ONE32
    np.reciprocal(t, out=t)
    np.multiply(t, _ERFC32[0], out=p)
    p += _ERFC32[1]
    for c in _ERFC32[2:]:
        p *= t
        p += c
    np.minimum(h, _CAP32, out=a)                    # |x|, capped
    np.bitwise_and(a.view(np.int32), _HIGH_BITS, out=h.view(np.int32))
    np.subtract(a, h, out=s)
    a += h
    s *= a
    s *= _HALF32                # (x**2 - h**2) / 2, small
    p -= s
    np.exp(p, out=p)
    np.multiply(h, h, out=s)
    s *= -_HALF32               # -h**2 / 2, exact
    np.exp(s, out=s)
    p *= s
    p *= t
    p *= -_HALF32
    p += np.greater(x, 0, out=a)
    np.abs(p, out=p)
    np.multiply(p, x, out=out)


def _piece_vmath(x: np.ndarray, out: np.ndarray, tmp: list[np.ndarray]) -> None:
    """``_piece32``'s result within float32 rounding, by the compiled Gelu (``vmath``)."""
    if vmath.usable(x, out):
        vmath.gelu(x, out)
    else:
        _piece32(x, out, tmp)


def gelu_erf(x: np.ndarray, dtype: np.dtype, bias: np.ndarray | None = None) -> np.ndarray:
    """Gelu(x + bias) as ``gelu_erf_whole(x + bias).astype(dtype)``, for float16/float32
    ``x`` (``bias``: 1-D, one value per last-axis element, of x's dtype, added in that
    dtype), without its whole-tensor temporaries. A new array of x's shape."""
    out = np.empty(x.shape, dtype)
    n = x.size
    if n == 0:
        return out
    width = x.shape[-1] if bias is not None else n
    xf = np.ascontiguousarray(x).reshape(-1, width)
    of = out.reshape(-1, width)
    block = n if n <= WHOLE else BLOCK
    rows = max(1, min(xf.shape[0], block // width))
    step = min(width, block)   # a row longer than a piece goes in pieces (no bias only)
    fast = _switch.FAST and x.dtype == _F32 and dtype == _F32
    piece = (_piece_vmath if vmath.built() else _piece32) if fast else _piece
    tmp = list(scratch.buffer("gelu.erf32" if fast else "gelu.erf",
                              (5, max(min(n, block), rows * width if bias is not None else 0)),
                              _F32 if fast else np.float64))
    summed = np.empty((rows, width) if bias is not None else (0, 0), x.dtype)   # x + bias, a piece at a time
    for r0 in range(0, xf.shape[0], rows):
        r1 = min(xf.shape[0], r0 + rows)
        if bias is None:
            for c0 in range(0, width, step):
                piece(xf[r0, c0:c0 + step], of[r0, c0:c0 + step], tmp)
            continue
        xs = np.add(xf[r0:r1], bias, out=summed[:r1 - r0])
        piece(xs.reshape(-1), of[r0:r1].reshape(-1), tmp)
    return out
