"""Argument checks of the eager API's entry points, in one place: each raises the
documented error, ``ACL_ERROR_INVALID_PARAM`` (100000), at the call that is wrong.

Without them a wrong argument surfaced later and elsewhere: an object dtype on a card
made a tensor whose elements were the block's old bytes read as pointers (SIGSEGV when
read back), ``wait_event('x')`` an AttributeError deep inside, and ``x + object()`` a
kernel fault at the next, unrelated op.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from graphexec._limits import over_budget
from graphexec.runtime.codes import invalid_param

DEVICE_KINDS = "biufc"   # bool, signed and unsigned ints, floats, complex: what a card's bytes can hold


def device_dtype(dtype: Any, where: str) -> np.dtype:
    """``dtype`` as a numpy dtype a card can hold; refused with the call's name otherwise."""
    try:
        dt = np.dtype(dtype)
    except (TypeError, ValueError):
        raise invalid_param(f"{where}: dtype {dtype!r} is not a dtype") from None
    if dt.kind not in DEVICE_KINDS:
        raise invalid_param(f"{where}: dtype {dt} cannot live on a device (bool, integer, float and complex "
                            "dtypes only)")
    return dt


def host_array(arr: np.ndarray, where: str) -> np.ndarray:
    """An array that may become a tensor: numbers and bool (torch refuses object arrays too)."""
    device_dtype(arr.dtype, where)
    return arr


def operand(x: Any, op: str) -> None:
    """A non-tensor argument of an op: a number, None, or numbers in an array or a list."""
    if x is None or isinstance(x, (int, float, complex, np.number, np.bool_)):
        return
    if isinstance(x, (np.ndarray, list, tuple)):
        try:
            kind = np.asarray(x).dtype.kind
        except (TypeError, ValueError):
            kind = "O"
        if kind in DEVICE_KINDS:
            return
    raise invalid_param(f"{op}: an operand must be a tensor, a number or an array of numbers, not "
                        f"{type(x).__name__}")


def value_of(x: Any, dtype: np.dtype, where: str, scalar: bool = False) -> np.ndarray:
    """``x`` (a number, or numbers) as an array of ``dtype``, converted here at the call, not
    inside a task on the stream (where a failure stalled the card's stream for good)."""
    operand(x, where)
    if scalar and np.ndim(x) != 0:
        raise invalid_param(f"{where}: the value must be a number, not an array of shape {list(np.shape(x))}")
    try:
        return np.asarray(x, dtype=dtype)
    except (TypeError, ValueError, OverflowError) as e:
        raise invalid_param(f"{where}: {x!r} is not a {dtype} value ({e})") from None


def host_bytes(shape: tuple[int, ...], itemsize: int, where: str) -> None:
    """A host array of ``shape`` must fit the host budget (a 2**40-element randn raised MemoryError)."""
    nbytes = math.prod(shape) * itemsize
    problem = over_budget(nbytes)
    if problem:
        raise invalid_param(f"{where}: a tensor of shape {list(shape)} {problem}")
