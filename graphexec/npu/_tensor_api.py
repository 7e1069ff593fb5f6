"""The tensor methods PyTorch code calls most, each an ONNX op launched like any other.

Named and shaped as torch names them: reductions over ``dim`` with ``keepdim``, ``T``,
``transpose``, ``permute``, the dtype shortcuts, the elementwise math, ``softmax``. A
float-only op on an int or bool tensor first makes it float32, as torch does; ``print``
shows the values (waiting for them, as torch does), with the device and a dtype other than
the default ones.
"""

from __future__ import annotations

import builtins
from collections import namedtuple
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from graphexec.npu._checks import operand, value_of
from graphexec.runtime.codes import invalid_param

RUN_OP: list[Any] = []   # ops.run_op, set when ops is imported
MinMax = namedtuple("MinMax", ["values", "indices"])   # torch.return_types.max / min
DEFAULTS = (np.dtype(np.float32), np.dtype(np.int64), np.dtype(np.bool_))


def _dims(dims: tuple[Any, ...]) -> list[int]:
    return list(dims[0]) if len(dims) == 1 and isinstance(dims[0], (tuple, list)) else [int(d) for d in dims]


def _scaled(other: Any, alpha: float, where: str) -> Any:
    """``other * alpha`` (torch's add/sub ``alpha``), ``other`` a tensor or numbers."""
    if alpha == 1:
        return other
    if not hasattr(other, "_run"):
        operand(other, where)
    try:
        return other * alpha if hasattr(other, "_run") or np.ndim(other) == 0 else np.multiply(other, alpha)
    except OverflowError as e:
        raise invalid_param(f"{where}: {other!r} times alpha {alpha!r}: {e}") from None


class TensorMethods:
    """Mixed into ``Tensor`` (slots, no state of its own)."""

    __slots__ = ()
    if TYPE_CHECKING:   # Tensor's own properties
        @property
        def shape(self) -> tuple[builtins.int, ...]: ...
        @property
        def dtype(self) -> np.dtype: ...
        @property
        def ndim(self) -> builtins.int: ...

    def _run(self, op: str, *args: Any, **attrs: Any) -> Any:
        return RUN_OP[0](op, [self, *args], attrs)

    def _axis(self, dim: builtins.int, where: str) -> builtins.int:
        """``dim`` of this tensor counted from 0 (torch's range: -ndim..ndim-1, a 0-d tensor's -1..0)."""
        n = max(1, self.ndim)
        if not -n <= dim < n:
            raise invalid_param(f"Tensor.{where}: dim {dim} is out of range for a tensor of {self.ndim} dims")
        return dim % n

    def _floating(self) -> Any:
        return self if self.dtype.kind == "f" or self.dtype.kind == "V" else self.type(np.float32)   # type: ignore[attr-defined]

    def _reduce(self, op: str, dim: Any, keepdim: bool) -> Any:
        if dim is None:
            return self._run(op, keepdims=int(keepdim))
        axes = [dim] if isinstance(dim, (builtins.int, np.integer)) else list(dim)
        for d in axes:
            self._axis(builtins.int(d), op.removeprefix("Reduce").lower())   # in range (ONNX's -r..r-1), as given
        return self._run(op, np.array(axes, dtype=np.int64), keepdims=int(keepdim))

    # ---- reductions ---------------------------------------------------------------
    def sum(self, dim: builtins.int | Sequence[builtins.int] | None = None, keepdim: bool = False,
            dtype: Any = None) -> Any:
        x = self if dtype is None else self.type(dtype)   # type: ignore[attr-defined]
        if dtype is None and self.dtype.kind in "bi" and self.dtype != np.int64:
            x = self.type(np.int64)   # type: ignore[attr-defined]   # torch sums ints and bools as int64
        return x._reduce("ReduceSum", dim, keepdim)

    def mean(self, dim: builtins.int | Sequence[builtins.int] | None = None, keepdim: bool = False) -> Any:
        return self._floating()._reduce("ReduceMean", dim, keepdim)

    def prod(self, dim: builtins.int | Sequence[builtins.int] | None = None, keepdim: bool = False) -> Any:
        return self._reduce("ReduceProd", dim, keepdim)

    def amax(self, dim: builtins.int | Sequence[builtins.int] | None = None, keepdim: bool = False) -> Any:
        return self._reduce("ReduceMax", dim, keepdim)

    def amin(self, dim: builtins.int | Sequence[builtins.int] | None = None, keepdim: bool = False) -> Any:
        return self._reduce("ReduceMin", dim, keepdim)

    def argmax(self, dim: builtins.int | None = None, keepdim: bool = False) -> Any:
        x = self if dim is not None else self.reshape(-1)   # type: ignore[attr-defined]
        return x._run("ArgMax", axis=0 if dim is None else dim, keepdims=int(keepdim and dim is not None))

    def argmin(self, dim: builtins.int | None = None, keepdim: bool = False) -> Any:
        x = self if dim is not None else self.reshape(-1)   # type: ignore[attr-defined]
        return x._run("ArgMin", axis=0 if dim is None else dim, keepdims=int(keepdim and dim is not None))

    def max(self, dim: builtins.int | None = None, keepdim: bool = False) -> Any:
        """The largest value, or with ``dim`` the (values, indices) along it."""
        if dim is None:
            return self.amax()
        return MinMax(self.amax(dim, keepdim), self.argmax(dim, keepdim))

    def min(self, dim: builtins.int | None = None, keepdim: bool = False) -> Any:
        if dim is None:
            return self.amin()
        return MinMax(self.amin(dim, keepdim), self.argmin(dim, keepdim))

    # ---- shape ----------------------------------------------------------------------
    @property
    def T(self) -> Any:
        return self.permute(*reversed(range(self.ndim)))

    def t(self) -> Any:
        return self.T if self.ndim == 2 else self

    def permute(self, *dims: builtins.int | Sequence[builtins.int]) -> Any:
        return self._run("Transpose", perm=[self._axis(d, "permute") for d in _dims(dims)])

    def transpose(self, dim0: builtins.int, dim1: builtins.int) -> Any:
        perm = list(range(self.ndim))
        dim0, dim1 = self._axis(dim0, "transpose"), self._axis(dim1, "transpose")
        perm[dim0], perm[dim1] = perm[dim1], perm[dim0]
        return self._run("Transpose", perm=perm)

    def unsqueeze(self, dim: builtins.int) -> Any:
        if not -self.ndim - 1 <= dim <= self.ndim:
            raise invalid_param(f"Tensor.unsqueeze: dim {dim} is out of range for a tensor of {self.ndim} dims")
        return self._run("Unsqueeze", np.array([dim], dtype=np.int64))

    def squeeze(self, dim: builtins.int | None = None) -> Any:
        if dim is None:
            return self._run("Squeeze")
        return self._run("Squeeze", np.array([dim], dtype=np.int64)) if self.shape[self._axis(dim, "squeeze")] == 1 \
            else self

    def flatten(self, start_dim: builtins.int = 0, end_dim: builtins.int = -1) -> Any:
        shape = list(self.shape)
        s, e = start_dim % max(1, len(shape)), end_dim % max(1, len(shape))   # torch: a 0-d tensor takes 0 and -1
        return self.reshape(*shape[:s], int(np.prod(shape[s:e + 1])), *shape[e + 1:])   # type: ignore[attr-defined]

    def expand(self, *sizes: builtins.int | Sequence[builtins.int]) -> Any:
        want = [old if new == -1 else new for new, old in zip(_dims(sizes), (1,) * (len(_dims(sizes)) - self.ndim)
                                                              + tuple(self.shape))]
        if not all(0 <= w < 2**63 for w in want):
            raise invalid_param(f"Tensor.expand: sizes must be -1 or from 0 to 2**63-1, got {list(_dims(sizes))}")
        return self._run("Expand", np.array(want, dtype=np.int64))

    def clone(self) -> Any:
        """A copy in bytes of its own (a device tensor's by a copy on the current stream)."""
        from graphexec.npu._copy import empty_on
        from graphexec.npu._tensor import Tensor

        if not getattr(self, "is_npu", False):
            return Tensor(np.array(self._arr, copy=True))   # type: ignore[attr-defined]
        out = empty_on(self.card(), self.dtype, self.shape)   # type: ignore[attr-defined]
        return out.copy_(self)

    def detach(self) -> Any:
        return self

    # ---- dtype ----------------------------------------------------------------------
    def half(self) -> Any:
        return self.type(np.float16)   # type: ignore[attr-defined]

    def float(self) -> Any:
        return self.type(np.float32)   # type: ignore[attr-defined]

    def double(self) -> Any:
        return self.type(np.float64)   # type: ignore[attr-defined]

    def int(self) -> Any:
        return self.type(np.int32)   # type: ignore[attr-defined]

    def long(self) -> Any:
        return self.type(np.int64)   # type: ignore[attr-defined]

    def bool(self) -> Any:
        return self.type(np.bool_)   # type: ignore[attr-defined]

    # ---- math -----------------------------------------------------------------------
    def exp(self) -> Any: return self._floating()._run("Exp")
    def log(self) -> Any: return self._floating()._run("Log")
    def sqrt(self) -> Any: return self._floating()._run("Sqrt")
    def rsqrt(self) -> Any: return self._floating()._run("Sqrt")._run("Reciprocal")
    def sigmoid(self) -> Any: return self._floating()._run("Sigmoid")
    def tanh(self) -> Any: return self._floating()._run("Tanh")
    def sin(self) -> Any: return self._floating()._run("Sin")
    def cos(self) -> Any: return self._floating()._run("Cos")
    def reciprocal(self) -> Any: return self._floating()._run("Reciprocal")
    def floor(self) -> Any: return self._run("Floor") if self.dtype.kind == "f" else self
    def ceil(self) -> Any: return self._run("Ceil") if self.dtype.kind == "f" else self
    def abs(self) -> Any: return self._run("Abs")
    def neg(self) -> Any: return self._run("Neg")

    def softmax(self, dim: builtins.int = -1) -> Any:
        return self._floating()._run("Softmax", axis=dim)

    def log_softmax(self, dim: builtins.int = -1) -> Any:
        return self._floating()._run("LogSoftmax", axis=dim)

    def clamp(self, min: builtins.float | None = None, max: builtins.float | None = None) -> Any:
        x = self
        if min is not None:
            x = x._run("Max", value_of(min, self.dtype, "Tensor.clamp", scalar=True))
        if max is not None:
            x = x._run("Min", value_of(max, self.dtype, "Tensor.clamp", scalar=True))
        return x

    clip = clamp

    def matmul(self, other: Any) -> Any:
        return self @ other   # type: ignore[operator]

    mm = matmul

    def add(self, other: Any, alpha: builtins.float = 1) -> Any:
        return self + _scaled(other, alpha, "Tensor.add")   # type: ignore[operator]

    def sub(self, other: Any, alpha: builtins.float = 1) -> Any:
        return self - _scaled(other, alpha, "Tensor.sub")   # type: ignore[operator]

    def mul(self, other: Any) -> Any:
        return self * other   # type: ignore[operator]

    def div(self, other: Any) -> Any:
        return self / other   # type: ignore[operator]

    def pow(self, other: Any) -> Any:
        return self ** other   # type: ignore[operator]

    # ---- printing -------------------------------------------------------------------
    def __repr__(self) -> str:
        """torch's ``tensor([...], device='npu:0', dtype=...)``: the values (waited for)."""
        arr = self.numpy()   # type: ignore[attr-defined]
        text = np.array2string(arr, separator=", ", prefix="tensor(", threshold=1000, edgeitems=3, precision=4,
                               floatmode="maxprec_equal")
        extra = "" if not getattr(self, "is_npu", False) else f", device='{self.device}'"   # type: ignore[attr-defined]
        if arr.dtype not in DEFAULTS:
            extra += f", dtype={arr.dtype}"
        return f"tensor({text}{extra})"

    __str__ = __repr__
