"""What a kernel computes at a lower precision than the model's: the device's numerics.

ATC's precision modes (``passes/precision.py``) may run a float32 op at float16 or
bfloat16. By default graphexec still computes the ONNX model's numbers (what
onnxruntime gives); with ``precision_numerics="device"`` a task run at a lower dtype
rounds its float operands to that dtype, computes (so a cube op accumulates in float32,
as the cube does into L0C) and rounds its outputs when they are stored at that dtype:
the accuracy a mode costs becomes visible.
"""

from __future__ import annotations

from typing import Any

import numpy as np

_FLOATS = (np.float32, np.float64)


def round_to(x: Any, dtype: str) -> Any:
    """``x`` rounded to ``dtype`` ("float16", "bfloat16") and held in its own dtype;
    anything not a float32/float64 array is returned as it is."""
    if not isinstance(x, np.ndarray) or x.dtype.type not in _FLOATS:
        return x
    if dtype == "float16":
        with np.errstate(over="ignore"):   # beyond 65504 float16 is inf, as on the device
            return x.astype(np.float16).astype(x.dtype)
    if dtype == "bfloat16":
        return _bfloat16(x)
    return x


def _bfloat16(x: np.ndarray) -> np.ndarray:
    """Round to nearest even on the upper 16 bits of the float32 pattern; NaN stays NaN."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    rounded = ((bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) & np.uint32(0xFFFF0000))
    out = rounded.view(np.float32)
    out = np.where(np.isnan(x), x.astype(np.float32), out)
    return out.astype(x.dtype)


class PrecisionRunner:
    """A task's runner at the device's precision: operands rounded to ``operand``, outputs
    to ``result`` (None: stored at the model's dtype, e.g. a cube op's float32 output)."""

    def __init__(self, inner: Any, operand: str, result: str | None) -> None:
        self.inner, self.operand, self.result = inner, operand, result

    @property
    def uses_fallback(self) -> bool:
        return bool(getattr(self.inner, "uses_fallback", False))

    def __call__(self, values: dict[str, Any], out: Any = None) -> dict[str, Any]:
        rounded = {k: round_to(v, self.operand) for k, v in values.items()}
        outputs = self.inner(rounded, out)
        if self.result is None:
            return outputs
        done: dict[str, Any] = {}
        for name, v in outputs.items():
            r = round_to(v, self.result)
            if r is not v and isinstance(v, np.ndarray) and v.flags.writeable:
                v[...] = r   # keep the array the kernel may have computed into (its output's view)
                r = v
            done[name] = r
        return done
