"""The one switch that turns every fast path off, for checking a fast path against its
plain reference (and for finding which of them a wrong result comes from).

``GRAPHEXEC_PLAIN=1`` in the environment, or ``with plain():`` in a process, runs:

- the Python event loop, step by step, instead of the compiled one (``runtime/_simcore.c``)
  and the batched loops (``runtime/sim_loop.py``, ``runtime/waves.py``);
- each run's simulation again instead of replaying the recorded timeline (``engine/replay.py``,
  ``cluster/tape.py``), and each kernel through its ``KernelCall`` instead of the
  prepared replay steps (``engine/steps.py``);
- the kernels' plain algorithms where a fast one sits beside them (im2col instead of
  Winograd, numpy's depthwise convolution, erf, Gelu and 8-bit (de)quantization instead of
  the compiled ones in ``kernels/_dwconv.c``, ``kernels/_vmath.c`` and ``kernels/_qlinear.c``,
  NonMaxSuppression's pair-by-pair loop).

Outputs agree within float tolerance; simulated times, schedules and traces are the same
either way (they never depend on how the host computes). The switch is read where each
fast path is chosen, so flipping it applies to the next run (a session's recorded timeline
is not replayed while it is off).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

ENV = "GRAPHEXEC_PLAIN"
FAST = os.environ.get(ENV, "") in ("", "0")


def fast() -> bool:
    """Whether the fast paths are on (``GRAPHEXEC_PLAIN`` unset or 0, and not inside ``plain()``)."""
    return FAST


@contextmanager
def plain() -> Iterator[None]:
    """Every fast path off inside the block (the process-wide switch, not per thread)."""
    global FAST
    before, FAST = FAST, False
    try:
        yield
    finally:
        FAST = before


def compiled(module: str, abi: int) -> Any:
    """The optional compiled module ``module`` (a C source ``setup.py`` builds where it can), or
    None where it was not built (no C compiler) or was built from a source of another ``ABI``
    (stale: ``pip install -e .`` rebuilds it). Whether a fast path uses it is still ``FAST``."""
    try:
        mod = importlib.import_module(module)
    except ImportError:
        return None
    return mod if getattr(mod, "ABI", None) == abi else None
