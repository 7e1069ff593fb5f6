"""float32 erf and erf-Gelu through the compiled ``_vmath.c`` (glibc's vector math library),
when it is built.

numpy has no erf: ``erf.erf32`` and ``gelu_erf._piece32`` make them from 20-30 whole-array
passes (MiniLM's 32x1536 BiasGelu 263 us, 66 us here). The module is optional (built on
x86-64 glibc only); ``GRAPHEXEC_PLAIN`` keeps the numpy formulas. Its results differ from
them by a few float32 ulps: erf within 1.1e-7 relative, Gelu 2.6e-7 of the exact value over
[-12, 12] (the negative tail included, see ``_vmath.c``).
"""

from __future__ import annotations

import numpy as np

from graphexec import _switch

ABI = 1   # what ``_vmath.c`` gives; 0 is a build without libmvec's functions
_vmath = _switch.compiled("graphexec.kernels._vmath", ABI)   # None: numpy

_F32 = np.dtype(np.float32)


def built() -> bool:
    """Whether the compiled functions are there and the fast paths on."""
    return _vmath is not None and _switch.FAST


def usable(x: np.ndarray, out: np.ndarray) -> bool:
    """Whether the compiled functions serve x -> out: built, fast paths on, both float32,
    C-contiguous and the same size, not overlapping (the vector tail reads x after writes)."""
    return built() and x.dtype == _F32 and out.dtype == _F32 \
        and x.size == out.size and x.flags.c_contiguous and out.flags.c_contiguous \
        and not np.may_share_memory(x, out)


def erf(x: np.ndarray, out: np.ndarray) -> None:
    """out[:] = erf(x), for arrays ``usable`` passed."""
    _vmath.erf(x, out)


def gelu(x: np.ndarray, out: np.ndarray) -> None:
    """out[:] = x/2 · erfc(-x/√2), for arrays ``usable`` passed."""
    _vmath.gelu(x, out)
