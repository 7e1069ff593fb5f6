"""Floating-point warnings off for a whole run, entered once.

Kernels compute IEEE results (inf, NaN) without numpy's RuntimeWarnings. Each elementwise
kernel used to enter ``np.errstate(all="ignore")`` itself, which costs 0.7 us a call: more
than the arithmetic of a small Add. A run enters :func:`run_quietly` once instead, and a
kernel that finds :func:`is_quiet` true on its thread skips its own errstate. Outside a
run (a kernel called directly, a worker thread of the pool) kernels keep entering it.
"""

from __future__ import annotations

import threading
from types import TracebackType

import numpy as np

_state = threading.local()


class run_quietly:   # noqa: N801   (used as the function it was: ``with run_quietly():``)
    """numpy's floating-point warnings off on this thread meanwhile, and known to be off.
    A class, not a ``@contextmanager`` generator: entering and leaving one of those was 2-3 us,
    a few percent of a decode step's run."""

    __slots__ = ("before", "state")

    def __enter__(self) -> None:
        self.before = getattr(_state, "on", False)
        self.state = np.errstate(all="ignore")
        self.state.__enter__()
        _state.on = True

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        _state.on = self.before
        self.state.__exit__(kind, exc, tb)


def is_quiet() -> bool:
    """Whether this thread runs inside :func:`run_quietly` (its warnings are already off)."""
    return getattr(_state, "on", False)
