"""Reusable temporaries for kernels (padded inputs, column matrices, transforms).

Fresh large numpy arrays come from mmap and pay a page fault per 4 KiB on first touch,
which costs more than the copy that fills them; a buffer kept per thread and per slot
is touched once. A slot's array is valid until the same thread asks for that slot
again, so a kernel never returns one (its result goes to ``out`` or a fresh array).
Requests above ``MAX_KEPT`` bytes are not kept, to bound what the host holds on to.
"""

from __future__ import annotations

import math
import threading
from typing import Any

import numpy as np

MAX_KEPT = 128 * 1024 * 1024
_local = threading.local()
_constants: dict[tuple, np.ndarray] = {}


def buffer(slot: str, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    """An uninitialized array of ``shape`` and ``dtype``, reused across calls on this thread."""
    dtype = np.dtype(dtype)
    need = math.prod(shape) * dtype.itemsize
    if need > MAX_KEPT:
        return np.empty(shape, dtype)
    bufs: dict[str, np.ndarray] | None = getattr(_local, "bufs", None)
    if bufs is None:
        bufs = _local.bufs = {}
    raw = bufs.get(slot)
    if raw is None or raw.nbytes < need:   # 8 spare bytes: copy_every_other may read one element past
        raw = bufs[slot] = np.empty(max(need, 64) + 8, np.uint8)
    return raw[:need].view(dtype).reshape(shape)


FRAMES_KEPT = 32 * 1024 * 1024   # bytes of padded frames a thread keeps (then it starts afresh)


def padded(slot: str, x: np.ndarray, begin: tuple[int, ...], shape: tuple[int, ...],
           value: float | int = 0) -> np.ndarray:
    """``x`` (C, H, W) placed at offset ``begin`` in a (C, *shape) scratch array filled with ``value``.

    Rows and columns of ``x`` that fall past ``shape`` are left out. The array is kept per
    geometry (slot, shapes, offset, value, dtype): its border is filled once, when it is
    made, and later calls only copy the interior, which the caller never writes. The
    border's 1-element column runs cost about as much as the interior's copy (a 128x14x14
    input: 10.8 -> 6.3 us; 272x14x14: 21 -> 14 us)."""
    (top, left), (hp, wp) = begin, shape
    x = x[:, :max(0, hp - top), :max(0, wp - left)]
    c, h, w = x.shape
    dtype = x.dtype
    key = (slot, dtype.str, c, hp, wp, top, left, h, w, np.asarray(value, dtype).tobytes())
    frames: dict[tuple, np.ndarray] | None = getattr(_local, "frames", None)
    if frames is None:
        frames = _local.frames = {}
    xp = frames.get(key)
    if xp is None:
        nbytes = c * hp * wp * dtype.itemsize
        if nbytes > FRAMES_KEPT:
            return _pad_fresh(x, (top, left), (hp, wp), value)
        if sum(f.nbytes for f in frames.values()) + nbytes > FRAMES_KEPT:
            frames.clear()
        # two spare elements past the end: copy_every_other may read a pair's odd half there
        xp = frames[key] = np.full(c * hp * wp + 2, value, dtype)[:c * hp * wp].reshape(c, hp, wp)
    xp[:, top:top + h, left:left + w] = x
    return xp


def _pad_fresh(x: np.ndarray, begin: tuple[int, int], shape: tuple[int, int], value: float | int) -> np.ndarray:
    """``padded`` into a new array, for one too big to keep."""
    (top, left), (c, h, w) = begin, x.shape
    xp = np.full((c, *shape), value, x.dtype)
    xp[:, top:top + h, left:left + w] = x
    return xp


MAX_CONSTANT = 1 << 22   # elements (16 MiB of float32): the cached constants stay bounded


def constant(value: float | int, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    """A read-only array of ``shape`` full of ``value``. numpy's min/max loops are several
    times faster on two arrays than on an array and a scalar (measured: Relu 94 -> 34 us
    on 1x24x112x112 float32), and the result is the same."""
    dtype = np.dtype(dtype)
    n = math.prod(shape)
    if n > MAX_CONSTANT:   # past this it would double a big tensor's host memory: broadcast a 0-d one
        return np.asarray(value, dtype)
    key = (dtype.str, value)
    arr = _constants.get(key)
    if arr is None or arr.size < n:
        arr = np.full(max(n, 1024), value, dtype)
        arr.flags.writeable = False
        _constants[key] = arr
    return arr[:n].reshape(shape)


def release() -> None:
    """Drop this thread's buffers and padded frames."""
    _local.bufs = {}
    _local.frames = {}


def _probe_truncating_cast() -> bool:
    """Whether numpy's int64 -> int32 cast keeps the low 32 bits of every value (C's
    conversion on this platform; a saturating SIMD loop would not) on a little-endian host."""
    import sys

    if sys.byteorder != "little":
        return False
    v = np.random.default_rng(0).integers(-2**63, 2**63 - 1, 4099, dtype=np.int64, endpoint=True)
    v[:4] = [-2**63, 2**63 - 1, -1, 2**31]
    got = np.empty(v.size, np.int32)
    np.copyto(got, v, casting="unsafe")
    return bool((got == (v & 0xFFFFFFFF).astype(np.uint32).view(np.int32)).all())


_TRUNCATES = _probe_truncating_cast()


def copy_every_other(dst: np.ndarray, src: np.ndarray, within: np.ndarray | None = None) -> None:
    """``np.copyto(dst, src)``, faster where ``src`` is float32 whose last axis steps over
    every other element (a stride-2 subsample): numpy copies such a view one element at a
    time, so the pairs are read as int64 and cast to int32, whose loop keeps the low half
    -- the even element, bit for bit (0.5-0.8x the time: 256x56x56 -> 28x28, 53 -> 38 us).
    The pairs' odd halves are read and dropped; one past the buffer's end is not read.
    ``within``: an array ``src`` is a view into, where numpy cannot tell (``as_strided``)."""
    if not src.ndim or src.strides[-1] != 8 or not (_TRUNCATES and src.dtype == dst.dtype == np.float32
                                                    and src.size and min(src.strides) > 0):
        np.copyto(dst, src)
        return
    root = src if within is None else within
    while isinstance(root.base, np.ndarray):
        root = root.base
    start = src.__array_interface__["data"][0] - root.__array_interface__["data"][0]
    end = start + sum((n - 1) * s for n, s in zip(src.shape, src.strides)) + 8
    if not root.flags.c_contiguous or start < 0 or end > root.nbytes:
        np.copyto(dst, src)
        return
    pairs = np.ndarray(src.shape, np.int64, buffer=root, offset=start, strides=src.strides)
    np.copyto(dst.view(np.int32), pairs, casting="unsafe")
