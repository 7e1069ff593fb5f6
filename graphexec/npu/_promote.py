"""torch's type promotion for the operators of eager tensors (``x + 2.5``, ``i / 2``, ``a * b``).

ONNX's binary ops take one dtype; torch promotes. Its rules, for the cases eager code meets:

- a Python number takes the tensor's dtype when it is of the same kind or a lower one
  (bool < int < float): ``float16 + 2.5`` stays float16, ``int32 * 2`` stays int32;
- of a higher kind it lifts the tensor: an int or bool tensor with a Python float becomes
  float32 (torch's default float dtype), a bool tensor with a Python int becomes int64;
- two tensors: the higher kind wins whatever its size (int64 + float16 is float16), and
  within a kind the wider dtype (numpy's ``promote_types``);
- true division of ints or bools (``/``) is float32, as torch's ``div``.

Comparisons promote the same way (``int_tensor < 2.5`` compares as float32). Numbers in a list,
a tuple or a numpy array promote as a tensor of them would (``torch.tensor``'s float32 and int64
for Python numbers), and are cast at the call: ``x + [2, 4, 6]`` is float32 for a float32 ``x``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

KIND = {"b": 0, "u": 1, "i": 1, "f": 2, "V": 2}   # bool < int < float ("V": ml_dtypes' bfloat16 and others)
SCALAR = {bool: 0, int: 1, float: 2}
DEFAULT: dict[int, np.dtype] = {1: np.dtype(np.int64), 2: np.dtype(np.float32)}


def _kind(dtype: np.dtype) -> int:
    return KIND.get(dtype.kind, 2)


def _array_dtype(x: Any) -> np.dtype | None:
    """The dtype ``x`` has as a tensor: a tensor's, an array's, or ``torch.tensor``'s for numbers in a
    list or tuple; None for a scalar, or for what no card can hold (the op's check refuses that)."""
    if hasattr(x, "_arr") or isinstance(x, np.ndarray):
        return x.dtype   # type: ignore[no-any-return]
    if not isinstance(x, (list, tuple)):
        return None
    try:
        d = np.asarray(x).dtype
    except (TypeError, ValueError):
        return None
    if d.kind in "iuf":
        return DEFAULT[_kind(d)]
    return d if d.kind == "b" else None


def result_dtype(op: str, a: Any, b: Any) -> np.dtype | None:
    """The dtype both operands of ``op`` take, or None when there is nothing to promote."""
    ta, tb = _array_dtype(a), _array_dtype(b)
    if ta is not None and tb is not None:
        out = ta if ta == tb else _wider(ta, tb)
    else:
        t, s = (ta, b) if ta is not None else (tb, a)
        if t is None or type(s) not in SCALAR:
            return None
        out = DEFAULT[SCALAR[type(s)]] if SCALAR[type(s)] > _kind(t) else t
    if op == "Div" and _kind(out) < 2:
        out = DEFAULT[2]
    return out


def _wider(a: np.dtype, b: np.dtype) -> np.dtype:
    ka, kb = _kind(a), _kind(b)
    if ka != kb:
        return a if ka > kb else b
    try:
        return np.promote_types(a, b)
    except TypeError:   # bfloat16 with float16: torch gives float32
        return np.dtype(np.float32)


def promote(op: str, a: Any, b: Any) -> tuple[Any, Any]:
    """``a`` and ``b`` as ``op`` takes them under torch's rules: tensors cast where their
    dtype differs from the result's, arrays of numbers made that dtype, numbers left as they are
    (the op casts them)."""
    out = result_dtype(op, a, b)
    if out is None:
        return a, b
    return tuple(_as(x, out) for x in (a, b))  # type: ignore[return-value]


def _as(x: Any, dtype: np.dtype) -> Any:
    if hasattr(x, "_arr"):
        return x.type(dtype) if x.dtype != dtype else x
    if isinstance(x, (np.ndarray, list, tuple)):
        return np.asarray(x).astype(dtype, copy=False)
    return x
