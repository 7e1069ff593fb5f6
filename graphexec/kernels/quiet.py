"""Floating-point warnings off for a whole run, entered once.

Kernels compute IEEE results (inf, NaN) without numpy's RuntimeWarnings. Each elementwise
kernel used to enter ``np.errstate(all="ignore")`` itself, which costs 0.7 us a call: more
than the arithmetic of a small Add. A run enters :func:`run_quietly` once instead, and a
kernel that finds :func:`is_quiet` true on its thread skips its own errstate. Outside a
run (a kernel called directly, a worker thread of the pool) kernels keep entering it.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Iterator

import numpy as np

_state = threading.local()


@contextmanager
def run_quietly() -> Iterator[None]:
    """numpy's floating-point warnings off on this thread meanwhile, and known to be off."""
    before = getattr(_state, "on", False)
    with np.errstate(all="ignore"):
        _state.on = True
        try:
            yield
        finally:
            _state.on = before


def is_quiet() -> bool:
    """Whether this thread runs inside :func:`run_quietly` (its warnings are already off)."""
    return getattr(_state, "on", False)
