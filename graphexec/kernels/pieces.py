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
Only Erf uses it: best of 40 alternating runs, pieces made QuantizeLinear,
DequantizeLinear and LayerNormalization slower (their few passes do not pay for the
pieces' calls; 1x400x384 LayerNormalization 189 -> 281 us) and Softmax no faster.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

PIECE = 65536   # elements per piece: a float32 piece and two temporaries take 768 KiB


def flat(fn: Callable[[np.ndarray, np.ndarray], Any], x: np.ndarray, out: np.ndarray | None) -> bool:
    """``fn(x_piece, out_piece)`` over the flattened tensors when both are C-contiguous, of one
    shape and dtype (a model may declare another output dtype: the kernel then casts), apart
    in memory and at least two pieces long; False (nothing done) otherwise."""
    align = np.getbufsize()
    step = max(align, PIECE // align * align)
    if not _fits(x, out, step):
        return False
    assert out is not None
    xf, of = x.reshape(-1), out.reshape(-1)
    for i in range(0, xf.size, step):
        fn(xf[i:i + step], of[i:i + step])
    return True


def _fits(x: np.ndarray, out: np.ndarray | None, step: int) -> bool:
    return out is not None and x.size >= 2 * step and out.shape == x.shape and out.dtype == x.dtype \
        and x.flags.c_contiguous and out.flags.c_contiguous and not np.may_share_memory(x, out)
