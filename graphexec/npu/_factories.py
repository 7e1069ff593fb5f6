"""Making tensors: from data, from numpy, random and constant ones, on the current device
unless ``device=`` says otherwise ("cpu" for the host)."""

from __future__ import annotations

from typing import Any

import numpy as np

from graphexec.errors import GraphExecError
from graphexec.npu import _launch
from graphexec.npu._checks import device_dtype, host_array, host_bytes, value_of
from graphexec.npu._copy import empty_on, span, upload
from graphexec.npu._state import STATE, parse_device
from graphexec.npu._tensor import Tensor

_RNG: dict[str, np.random.Generator] = {}


def manual_seed(seed: int) -> None:
    """Seed the generator randn/rand draw from (on the host; the values are then uploaded)."""
    _RNG["gen"] = np.random.default_rng(seed)


def _gen() -> np.random.Generator:
    if "gen" not in _RNG:
        manual_seed(0)
    return _RNG["gen"]


def _shape(size: tuple[Any, ...]) -> tuple[int, ...]:
    dims = size[0] if len(size) == 1 and isinstance(size[0], (tuple, list)) else size
    if not all(isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d >= 0 for d in dims):
        raise GraphExecError(f"a tensor's size must be ints >= 0, got {list(dims)}")
    return tuple(int(d) for d in dims)


def _place(arr: np.ndarray, device: Any) -> Tensor:
    index = parse_device(device)
    return Tensor(arr) if index is None else upload(arr, STATE.card(index))


def tensor(data: Any, dtype: Any = None, device: Any = None) -> Tensor:
    """A tensor holding a copy of ``data`` (lists, numbers, arrays, a Tensor's values)."""
    arr = data.numpy() if isinstance(data, Tensor) else data
    try:
        arr = np.array(arr, dtype=dtype)
    except (TypeError, ValueError, OverflowError) as e:
        raise GraphExecError(f"npu.tensor: cannot make a tensor of {type(data).__name__}: {e}") from None
    host_array(arr, "npu.tensor")
    if dtype is None and arr.dtype == np.float64:
        arr = arr.astype(np.float32)   # torch's default float dtype
    return _place(arr, device)


def from_numpy(arr: np.ndarray) -> Tensor:
    """A host tensor sharing ``arr``'s memory (torch.from_numpy)."""
    if not isinstance(arr, np.ndarray):
        raise GraphExecError(f"from_numpy needs a numpy array, got {type(arr).__name__}")
    return Tensor(host_array(arr, "npu.from_numpy"))


def randn(*size: Any, dtype: Any = np.float32, device: Any = None) -> Tensor:
    return _place(_gen().standard_normal(_drawn(size, dtype, "npu.randn")).astype(dtype), device)


def rand(*size: Any, dtype: Any = np.float32, device: Any = None) -> Tensor:
    return _place(_gen().random(_drawn(size, dtype, "npu.rand")).astype(dtype), device)


def _drawn(size: tuple[Any, ...], dtype: Any, where: str) -> tuple[int, ...]:
    """The shape of a draw, checked: a dtype a card holds, float64 draws that fit the host."""
    shape = _shape(size)
    device_dtype(dtype, where)
    host_bytes(shape, 8, where)
    return shape


def empty(*size: Any, dtype: Any = np.float32, device: Any = None) -> Tensor:
    """Uninitialized: on a device, the block's bytes as the allocator hands it out."""
    index = parse_device(device)
    if index is None:
        dt = device_dtype(dtype, "npu.empty")
        host_bytes(_shape(size), dt.itemsize, "npu.empty")
        return Tensor(np.empty(_shape(size), dtype=dt))
    return empty_on(STATE.card(index), dtype, _shape(size))


def full(size: Any, fill_value: Any, dtype: Any = np.float32, device: Any = None) -> Tensor:
    """Filled on the device by a memset-like task on the current stream."""
    shape = _shape(tuple(size) if isinstance(size, (tuple, list)) else (size,))
    dtype = device_dtype(dtype, "npu.full")
    value = value_of(fill_value, dtype, "npu.full", scalar=True)
    index = parse_device(device)
    if index is None:
        host_bytes(shape, dtype.itemsize, "npu.full")
        return Tensor(np.full(shape, value, dtype=dtype))
    card = STATE.card(index)
    out = empty_on(card, dtype, shape)
    view = out._arr
    _launch.copy(card, card.current, "d2d", view.nbytes, lambda: value, lambda v: view.__setitem__(..., v),
                 writes=[span(out)] if card.device.checker is not None else ())
    return out


def zeros(*size: Any, dtype: Any = np.float32, device: Any = None) -> Tensor:
    return full(_shape(size), 0, dtype, device)


def ones(*size: Any, dtype: Any = np.float32, device: Any = None) -> Tensor:
    return full(_shape(size), 1, dtype, device)
