"""Per-channel elementwise steps (a conv's bias, BatchNorm's x*k+shift) without numpy's
buffering of the broadcast operand.

An operand that broadcasts along a tensor's trailing axes (a (C, 1, 1) bias against
(N, C, H, W)) has stride 0 there. When a contiguous run (H*W) is shorter than numpy's
buffer (8192 elements), the ufunc machinery buffers the operands to hand its inner loop a
longer run, and copies the repeated value into the buffer element by element: 136x28x28 +
bias takes 15 us where a scalar add takes 4. With a buffer smaller than the run, numpy
calls the loop straight on each run, with the stride-0 operand as a scalar: 9 us; 64x55x55,
24 -> 11 us. Runs shorter than ``MIN_RUN`` keep the buffered loop, whose per-run cost is
lower. Either way the loop adds the same two numbers per element, so the result is
bit-identical (tested with ``np.array_equal``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

MIN_RUN = 512     # contiguous elements per channel from which the unbuffered loop wins
_SMALL_BUFFER = 64   # elements: below every run that takes the unbuffered loop


def stride0_run(sa: tuple[int, ...], sb: tuple[int, ...]) -> int:
    """How many elements of the broadcast result one operand repeats along the innermost
    axes (its trailing dims of 1 where the other's are longer): the run numpy's loop gets
    with a stride-0 operand; 1 when neither repeats along the last axis."""
    run, which = 1, 0
    for da, db in zip(reversed(sa), reversed(sb)):
        if da == db:
            if da == 1:
                continue
            break
        side = 1 if da == 1 else 2 if db == 1 else 0
        if side == 0 or which not in (0, side):
            break
        run, which = run * (db if side == 1 else da), side
    return run


def call(ufunc: Any, a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None) -> Any:
    """``ufunc(a, b, out=out)``, with numpy's small buffer when one operand repeats along a
    run of at least ``MIN_RUN`` innermost elements (see the module docstring); both
    operands C-contiguous, of one dtype. Elementwise ufuncs only: no reduction."""
    if a.dtype != b.dtype or stride0_run(a.shape, b.shape) < MIN_RUN or not (
            a.flags.c_contiguous and b.flags.c_contiguous and (out is None or out.flags.c_contiguous)):
        return ufunc(a, b, out=out)
    old = np.setbufsize(_SMALL_BUFFER)
    try:
        return ufunc(a, b, out=out)
    finally:
        np.setbufsize(old)


def apply(ufunc: Any, x: np.ndarray, c: np.ndarray, out: np.ndarray) -> np.ndarray:
    """``ufunc(x, c, out=out)`` for a per-channel ``c`` (its trailing axes of length 1, e.g.
    (1, C, 1, 1) or (C, 1, 1)) against ``x`` of the same dtype."""
    return call(ufunc, x, c, out)
