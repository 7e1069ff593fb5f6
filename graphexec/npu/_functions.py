"""The ``torch.*`` functions eager code calls most, as ``npu.*``: each the tensor method of
the same name, or the ONNX op (``cat``: Concat, ``stack``: Unsqueeze then Concat, ``where``:
Where); ``arange`` and the ``*_like`` factories make their values on the host, then place
them as ``npu.tensor`` does."""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from graphexec.errors import GraphExecError
from graphexec.npu._checks import device_dtype, host_bytes
from graphexec.npu._factories import full, ones, tensor, zeros
from graphexec.npu._tensor import Tensor
from graphexec.npu.ops import run_op
from graphexec.runtime.codes import invalid_param


def _tensors(xs: Sequence[Any], name: str) -> list[Tensor]:
    if not isinstance(xs, (list, tuple)) or not xs or not all(isinstance(x, Tensor) for x in xs):
        raise GraphExecError(f"npu.{name} takes a non-empty list or tuple of tensors")
    return list(xs)


def cat(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    """torch.cat: along ``dim`` (the dtypes promoted as torch promotes them)."""
    xs = _tensors(tensors, "cat")
    dtype = xs[0].dtype
    for x in xs[1:]:
        dtype = _common(dtype, x.dtype)
    xs = [x if x.dtype == dtype else x.type(dtype) for x in xs]
    return xs[0] if len(xs) == 1 else run_op("Concat", list(xs), {"axis": dim})


def _common(a: np.dtype, b: np.dtype) -> np.dtype:
    from graphexec.npu._promote import _wider

    return a if a == b else _wider(a, b)


concat = cat


def stack(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    return cat([x.unsqueeze(dim) for x in _tensors(tensors, "stack")], dim)


def matmul(a: Tensor, b: Tensor) -> Tensor:
    return a @ b


mm = matmul


def where(condition: Tensor, x: Any, y: Any) -> Tensor:
    return run_op("Where", [condition, x, y], {})


def transpose(x: Tensor, dim0: int, dim1: int) -> Tensor: return x.transpose(dim0, dim1)
def permute(x: Tensor, dims: Sequence[int]) -> Tensor: return x.permute(*dims)
def flatten(x: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor: return x.flatten(start_dim, end_dim)
def reshape(x: Tensor, shape: Sequence[int]) -> Tensor: return x.reshape(*shape)
def exp(x: Tensor) -> Tensor: return x.exp()
def log(x: Tensor) -> Tensor: return x.log()
def sqrt(x: Tensor) -> Tensor: return x.sqrt()
def sigmoid(x: Tensor) -> Tensor: return x.sigmoid()
def tanh(x: Tensor) -> Tensor: return x.tanh()
def abs(x: Tensor) -> Tensor: return x.abs()
def relu(x: Tensor) -> Tensor: return x.relu()
def softmax(x: Tensor, dim: int = -1) -> Tensor: return x.softmax(dim)
def log_softmax(x: Tensor, dim: int = -1) -> Tensor: return x.log_softmax(dim)
def sum(x: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor: return x.sum(dim, keepdim)
def mean(x: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor: return x.mean(dim, keepdim)
def argmax(x: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor: return x.argmax(dim, keepdim)
def clamp(x: Tensor, min: Any = None, max: Any = None) -> Tensor: return x.clamp(min, max)


def arange(start: float, end: float | None = None, step: float = 1, dtype: Any = None, device: Any = None) -> Tensor:
    """torch.arange: int64 for whole-number bounds, else float32, unless ``dtype`` says."""
    lo, hi = (0, start) if end is None else (start, end)
    ints = all(isinstance(v, (int, np.integer)) for v in (lo, hi, step))
    dt = device_dtype(dtype if dtype is not None else (np.int64 if ints else np.float32), "npu.arange")
    host_bytes((_count(lo, hi, step),), dt.itemsize, "npu.arange")
    arr = np.arange(lo, hi, step, dtype=dt)
    return tensor(arr, dtype=arr.dtype, device=device)


def _count(lo: float, hi: float, step: float) -> int:
    """How many values ``arange`` makes, worked out before numpy is asked to make them."""
    try:
        if all(math.isfinite(v) for v in (lo, hi, step)) and step != 0:
            return max(0, math.ceil((hi - lo) / step))
    except OverflowError:
        pass
    raise invalid_param(f"npu.arange: needs finite bounds and a nonzero step, got {lo!r}, {hi!r}, {step!r}")


def _like(x: Tensor, maker: Any, *args: Any, dtype: Any = None, device: Any = None) -> Tensor:
    return maker(*x.shape, *args, dtype=dtype or x.dtype, device=device if device is not None else str(x.device))


def zeros_like(x: Tensor, dtype: Any = None, device: Any = None) -> Tensor:
    return _like(x, zeros, dtype=dtype, device=device)


def ones_like(x: Tensor, dtype: Any = None, device: Any = None) -> Tensor:
    return _like(x, ones, dtype=dtype, device=device)


def full_like(x: Tensor, fill_value: Any, dtype: Any = None, device: Any = None) -> Tensor:
    return full(x.shape, fill_value, dtype=dtype or x.dtype, device=device if device is not None else str(x.device))
