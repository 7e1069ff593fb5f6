"""The Erf kernel: float64 by series and erfc, float32 by glibc's vector erff where
``vmath`` is built, else (and float16) by one polynomial under tanh, in cache-sized pieces
on big tensors."""

from __future__ import annotations

import math
from functools import reduce
from typing import Any

import numpy as np

from graphexec.kernels import pieces, scratch, vmath
from graphexec.kernels.elementwise import _check, _kernel
from graphexec.kernels.registry import OpContext

# Erf, float64: Taylor series near 0, Numerical Recipes erfc (relative error < 1.2e-7) elsewhere.
_ERFC = (-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806,
         0.27886807, -1.13520398, 1.48851587, -0.82215223, 0.17087277)
# erf(z) = 2/sqrt(pi) * z * sum_n (-1)^n z^2n / (n! (2n+1)); 8 terms reach 1e-9 for |z| < 0.5.
_TAYLOR = tuple(2 / math.sqrt(math.pi) * (-1) ** n / (math.factorial(n) * (2 * n + 1)) for n in range(8))
# Erf, float32: erf(x) = tanh(x * G(x^2)) with G(s) = atanh(erf(sqrt s)) / sqrt s, smooth on [0, 16]
# (erf(4) is 1 in float32). G's coefficients in s: a least-squares fit weighted by how much an
# error in G moves erf's relative error, reweighted toward its minimax; G is off by < 3.2e-8 relative.
_ERF_G = (1.1283792, 0.102771314, -0.000202149038, -0.000603685412, 7.64927561e-05, -1.86220018e-06,
          -5.14884234e-07, 5.38976708e-08, -1.64011375e-09)
_F32 = np.dtype(np.float32)


def _horner(coeffs: tuple[float, ...], t: np.ndarray) -> np.ndarray:
    first: Any = coeffs[-1]   # a float; the first step makes the accumulator an array
    return reduce(lambda acc, c: acc * t + c, coeffs[-2::-1], first)


def _erf(x: np.ndarray) -> np.ndarray:
    z = np.abs(x.astype(np.float64))
    t = 1.0 / (1.0 + 0.5 * z)
    far = 1.0 - t * np.exp(_horner(_ERFC, t) - z * z)
    near = z * _horner(_TAYLOR, z * z)
    return np.copysign(np.where(z < 0.5, near, far), x).astype(x.dtype)


def erf32(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """erf of a float32 (or float16) ``x`` in float32, into ``out`` when it fits: one polynomial
    and numpy's vectorized tanh, no branch (numpy's ``where`` on a mixed mask costs more than
    all the arithmetic: 3x slower than this whole function). Within 3 ulp of the true erf,
    0.5 ulp on average; odd, NaN and +-inf as erf (x^2 is capped at 16 first)."""
    xf = x.astype(_F32, copy=False)
    y = out if out is not None and out.shape == x.shape and out.dtype == _F32 and not np.may_share_memory(out, xf) \
        else np.empty(x.shape, _F32)
    s = scratch.buffer("erf.s", x.shape, _F32)
    np.multiply(xf, xf, out=s)
    np.minimum(s, scratch.constant(16.0, s.shape, _F32), out=s)
    np.multiply(s, _F32.type(_ERF_G[-1]), out=y)
    y += _F32.type(_ERF_G[-2])
    for c in _ERF_G[-3::-1]:
        y *= s
        y += _F32.type(c)
    y *= xf
    return np.tanh(y, out=y)


@_kernel("Erf", out=True)
def erf(ctx: OpContext, x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    _check("Erf", "f", x)
    if x.dtype == np.float64:
        return _erf(x)
    if x.dtype == _F32 and vmath.built():
        y = out if out is not None and vmath.usable(x, out) else np.empty(x.shape, _F32)
        if vmath.usable(x, y):
            vmath.erf(x, y)
            return y
    if x.dtype == _F32 and pieces.flat(erf32, x, out):
        return out   # type: ignore[return-value]   # flat ran, so out is an array
    y = erf32(x, out if out is not None and out.dtype == x.dtype else None)
    return y.astype(x.dtype, copy=False)
