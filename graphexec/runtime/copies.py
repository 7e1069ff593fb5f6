"""A run's blocking host copies in one call: its feeds in, or its outputs out.

``Device.memcpy_sync`` times one blocking copy: the simulator runs up to the host's clock,
the bytes move, the host's clock moves on by the copy's fixed cost and its bytes over the
link's bandwidth. A decode step makes ~20 of them around ~150 tiny kernels, and each
paid the simulator's loop, two descriptor reads and a closure; ``host_copies`` makes the
same copies with the same clock arithmetic in one loop.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Sequence

import numpy as np


def host_copies(dev: Any, kind: str, pairs: Sequence[tuple[np.ndarray, np.ndarray]], moved: bool = False) -> None:
    """``dst[...] = src`` for each pair in turn on device ``dev``, each a blocking copy of
    ``kind`` timed exactly as ``memcpy_sync`` times it: the simulator is advanced only where
    something in it is due by the copy's start (``advance_to``'s loop finds nothing to do
    otherwise), the host clock summed in the same order. ``memcpy_sync`` per pair is the plain
    reference, taken with the hazard checker on (it watches each copy) or on a server's shared
    clock (``SimGroup``). ``moved``: the caller has put the bytes in place already (a run's
    outputs, copied by ``ndarray.copy`` once the device has synchronized: nothing left to run
    reads or writes them), and only the clock moves."""
    if dev.checker is not None or dev.group is not None:
        for dst, src in pairs:
            dev.memcpy_sync(src.nbytes, kind, _moved if moved else partial(dst.__setitem__, ..., src))
        return
    sim = dev.sim   # the descriptor submits any held launches first (``runtime/held.py``)
    bw, over = dev._bandwidth(kind), dev.profile.task_overhead_us
    t = dev._host_t
    due = sim.next_t()   # only ``advance_to`` changes it: a copy moves bytes, not the simulator's events
    for dst, src in pairs:
        if due <= t:
            sim.advance_to(t)
            due = sim.next_t()
        elif t > sim.now:
            sim.now = t
        if not moved:
            dst[...] = src
        t = t + over + src.nbytes / bw
    dev._host_t = t


def _moved() -> None:
    """A copy whose bytes the caller has moved already (``host_copies``' ``moved``)."""
