"""Depthwise float32 convolution through the compiled loop (``_dwconv.c``), when it is built.

numpy has no depthwise form at memory speed: conv2d's batched (1 x k·k) matmul over copied
columns spends most of its time making the columns (ShuffleNet's 16 depthwise layers took
about 4.5 ms of its 13.7 ms run, onnxruntime the whole model 5.8 ms). The compiled loop
takes each output row's taps in registers, 3-5x faster. The module is optional (a build
without a C compiler keeps conv2d's numpy path), and ``GRAPHEXEC_PLAIN`` keeps numpy too.
Its sums are in tap order, BLAS's in its own: the outputs differ by a rounding.
"""

from __future__ import annotations

import numpy as np

from graphexec import _switch

ABI = 1   # what ``_dwconv.c`` takes; a module built from another source is not used
_dwconv = _switch.compiled("graphexec.kernels._dwconv", ABI)   # None: conv2d's numpy path

_F32 = np.dtype(np.float32)


def available() -> bool:
    """Whether the compiled loop is built and the fast paths are on."""
    return _dwconv is not None and _switch.FAST


def run(x: np.ndarray, w: np.ndarray, kernel: list[int], strides: list[int], dil: list[int],
        begin: list[int], y: np.ndarray) -> bool:
    """y (C, Ho, Wo) = the depthwise conv of x (C, H, W) by w (C, 1, kh, kw), zero padded by
    ``begin`` (rows, columns) and to the end; False (y untouched) where the compiled loop
    does not serve: not built, plain switch, not float32, negative pads, or y not C-contiguous.
    The caller sends filters with a non-finite weight elsewhere (0·inf at a pad is NaN there)."""
    if not available() or x.dtype != _F32 or w.dtype != _F32 or y.dtype != _F32 or min(begin) < 0 \
            or not y.flags.c_contiguous:
        return False
    c, h, wd = x.shape
    ho, wo = y.shape[1:]
    _dwconv.depthwise(np.ascontiguousarray(x), np.ascontiguousarray(w), y,
                      (c, h, wd, ho, wo, *kernel, *strides, *dil, *begin))
    return True
