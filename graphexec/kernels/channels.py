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


def apply(ufunc: Any, x: np.ndarray, c: np.ndarray, out: np.ndarray) -> np.ndarray:
    """``ufunc(x, c, out=out)`` for a per-channel ``c`` (its trailing axes of length 1, e.g.
    (1, C, 1, 1) or (C, 1, 1)) against a C-contiguous ``x`` of the same dtype."""
    run = 1
    for d, e in zip(reversed(x.shape), reversed(c.shape)):
        if e != 1:
            break
        run *= d
    if run < MIN_RUN or c.dtype != x.dtype or not (x.flags.c_contiguous and out.flags.c_contiguous):
        return ufunc(x, c, out=out)
    old = np.setbufsize(_SMALL_BUFFER)
    try:
        return ufunc(x, c, out=out)
    finally:
        np.setbufsize(old)

