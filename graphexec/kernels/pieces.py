"""Elementwise kernels over a big tensor, a cache-sized piece at a time.

A chain of numpy passes over a tensor larger than L2 streams every pass through the outer
caches (or memory); cut into pieces of ``PIECE`` elements, each piece's passes run on data
that stays in L2 (1 MiB per core here): smart_turn's 1x400x1536 Erf 1.10 -> 0.89 ms,
1x6x400x400 1.73 -> 1.46 ms (best of 40, alternating).

Bits: numpy's loops compute a number the same in a vector lane or in the scalar tail, but
not which NaN comes out when both operands are NaN (a compiler may swap a commutative
op's operands), and a broadcast operand makes numpy run the loop on buffers of
``np.getbufsize()`` elements, so where the tails fall depends on the call's size. Every
piece therefore starts at a multiple of the buffer size from the tensor's start and holds
a multiple of it: the loops see the same lanes, tails and buffers as the whole call, and
the result is the whole call's, NaN signs and payloads included (tests compare ``tobytes``).
Rows (``rows``) keep a reduction along the last axis within one piece.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

PIECE = 65536   # elements per piece: a float32 piece and two temporaries take 768 KiB


def flat(fn: Callable[[np.ndarray, np.ndarray], Any], x: np.ndarray, out: np.ndarray | None) -> bool:
    """``fn(x_piece, out_piece)`` over the flattened tensors when both are C-contiguous, of one
    shape, apart in memory and at least two pieces long; False (nothing done) otherwise."""
    align = np.getbufsize()
    step = max(align, PIECE // align * align)
    if not _fits(x, out, step):
        return False
    assert out is not None
    xf, of = x.reshape(-1), out.reshape(-1)
    for i in range(0, xf.size, step):
        fn(xf[i:i + step], of[i:i + step])
    return True


def rows(fn: Callable[[np.ndarray, np.ndarray], Any], x: np.ndarray, out: np.ndarray | None) -> bool:
    """``fn`` over pieces of whole rows (the last axis), for a kernel whose reductions run along
    the last axis only: as many rows as fit in a piece, in a multiple of the buffer size
    (up to ``4 * PIECE`` where the row length allows no less); False (nothing done) when
    ``flat`` would refuse or no such piece exists."""
    if not x.ndim or not x.shape[-1]:
        return False
    n, align = x.shape[-1], np.getbufsize()
    unit = align // math.gcd(n, align)   # rows per buffer-aligned block
    step = unit * max(1, PIECE // (unit * n))
    if step * n > 4 * PIECE or not _fits(x, out, step * n):
        return False
    assert out is not None
    xr, orows = x.reshape(-1, n), out.reshape(-1, n)
    for i in range(0, xr.shape[0], step):
        fn(xr[i:i + step], orows[i:i + step])
    return True


def _fits(x: np.ndarray, out: np.ndarray | None, step: int) -> bool:
    return out is not None and x.size >= 2 * step and out.shape == x.shape and x.flags.c_contiguous \
        and out.flags.c_contiguous and not np.may_share_memory(x, out)
