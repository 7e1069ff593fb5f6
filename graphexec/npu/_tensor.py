"""``npu.Tensor``: a numpy array on the host, or a view of device memory on ``npu:N``.

A device tensor owns a :class:`Storage`, a block of its card's caching allocator; views
(basic indexing, reshapes) share it. When the last tensor of a storage is dropped, the
block goes back to the allocator's pool at once (stream order keeps it safe on its own
stream; ``record_stream`` makes another stream's use count). Reading a device tensor's
values (``.cpu()``, ``.numpy()``, ``.item()``) waits for the copy that fetches them.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from graphexec.errors import DeviceError, GraphExecError
from graphexec.npu._checks import device_dtype, value_of
from graphexec.npu._state import STATE, Card, parse_device
from graphexec.npu._tensor_api import TensorMethods
from graphexec.runtime.codes import invalid_param
from graphexec.runtime.stream import Stream as RtStream

RUN_OP: list[Any] = []   # ops.run_op, set when ops is imported (it imports this module)
BINARY: list[Any] = []   # ops.binary: run_op for the operators' common cases
_NO_ATTRS: dict[str, Any] = {}
# called with (card, ptr, +bytes) after each block is taken and (card, ptr, -bytes) after it
# is given back: the profiler's memory record (npu/profiler.py), while one is collecting
MEMORY_HOOKS: list[Callable[[Card, int, int], None]] = []


class device:
    """torch.device: ``type`` ("npu" or "cpu") and ``index``; equal to its string form."""

    __slots__ = ("type", "index")

    def __init__(self, type: str, index: int | None = None) -> None:
        self.type, self.index = type, index

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"

    __repr__ = __str__

    def __eq__(self, other: object) -> bool:
        return str(self) == str(other)

    def __hash__(self) -> int:
        return hash(str(self))


class Storage:
    """A block of a card's caching allocator, returned to it when no tensor holds it.

    ``data`` is the bytes of the block's segment and ``offset`` where the block starts in
    them: a tensor's array is made straight on them (``view``), not on a slice first.
    """

    __slots__ = ("card", "ptr", "nbytes", "data", "offset", "__weakref__")

    def __init__(self, card: Card, nbytes: int, stream: RtStream) -> None:
        self.card = card
        self.nbytes = nbytes
        alloc = card.allocator
        self.ptr = ptr = alloc.malloc(nbytes or 1, stream)
        base = alloc.live[ptr].segment
        data = card.segments.get(base)
        if data is None:   # a segment seen for the first time: its bytes, looked up once
            card.forget_segments()
            data = card.segments[base] = card.device.memory.segment(base)[0].data
        self.data = data
        self.offset = ptr - base
        if MEMORY_HOOKS:   # the profiler's memory record (profile_memory=True)
            for hook in MEMORY_HOOKS:
                hook(card, ptr, nbytes)

    def view(self, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
        """The block's first bytes as an array of ``dtype`` and ``shape``."""
        return np.ndarray(shape, dtype, self.data, self.offset)

    def __del__(self) -> None:
        try:
            ptr, card = self.ptr, self.card
        except AttributeError:   # its malloc raised (out of memory): nothing to free
            return
        if card.alive:
            card.allocator.free(ptr)
            if MEMORY_HOOKS:
                for hook in MEMORY_HOOKS:
                    hook(card, ptr, -self.nbytes)


class Tensor(TensorMethods):
    """A tensor on the host (``device="cpu"``) or on a card (``"npu:N"``).

    Example:
        >>> x = npu.randn(4, 4)                  # on the current device
        >>> y = (x @ x).relu() + 1               # launched, not yet computed
        >>> y.cpu().numpy()                      # waits, then copies out
    """

    __slots__ = ("_arr", "_store", "__weakref__")
    __hash__ = object.__hash__
    __array_priority__ = 1000   # numpy defers to Tensor's operators

    def __init__(self, arr: np.ndarray, store: Storage | None = None) -> None:
        self._arr, self._store = arr, store

    # ---- what it is ------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        return self._arr.shape

    @property
    def dtype(self) -> np.dtype:
        return self._arr.dtype

    @property
    def device(self) -> device:
        return device("cpu") if self._store is None else device("npu", self._store.card.index)

    @property
    def is_npu(self) -> bool:
        return self._store is not None

    @property
    def ndim(self) -> int:
        return self._arr.ndim

    def dim(self) -> int:
        return self._arr.ndim

    def numel(self) -> int:
        return int(self._arr.size)

    def size(self, dim: int | None = None) -> Any:
        return self.shape if dim is None else self.shape[self._axis(dim, "size")]

    def element_size(self) -> int:
        return self._arr.itemsize

    def __len__(self) -> int:
        if not self.shape:
            raise GraphExecError("len() of a 0-d tensor")
        return self.shape[0]

    def __bool__(self) -> bool:
        """A one-element tensor's truth (waiting for it, as torch does); more is ambiguous."""
        if int(np.prod(self.shape)) != 1:
            raise GraphExecError(f"the truth value of a tensor of {int(np.prod(self.shape))} values is ambiguous")
        return bool(self.item())

    def card(self) -> Card:
        """The card of a device tensor (checked alive)."""
        if self._store is None:
            raise DeviceError("this tensor is on the host; call .npu() first")
        c = self._store.card
        c.check()
        return c

    # ---- moving ----------------------------------------------------------------------
    def to(self, device: Any = None, dtype: Any = None, non_blocking: bool = False) -> Tensor:
        """A copy on ``device`` (this tensor if already there); ``dtype`` casts too."""
        from graphexec.npu._copy import to_device

        if isinstance(device, (type, np.dtype)):   # x.to(np.float16): a cast, as torch's to(dtype)
            device, dtype = None, device
        if dtype is not None:
            dtype = device_dtype(dtype, "Tensor.to")
        out = to_device(self, parse_device(device) if device is not None else
                        (None if self._store is None else self._store.card.index))
        return out if dtype is None or np.dtype(dtype) == out.dtype else out.type(dtype)

    def npu(self, device: Any = None, non_blocking: bool = False) -> Tensor:
        return self.to(parse_device(device) if device is not None else STATE.current_device)

    def cpu(self) -> Tensor:
        return self.to("cpu")

    def numpy(self) -> np.ndarray:
        """The values as a numpy array (a device tensor's are copied out first, waiting)."""
        return self._arr if self._store is None else self.cpu()._arr

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        arr = self.numpy()
        return arr if dtype is None else arr.astype(dtype)

    def item(self) -> Any:
        if self.numel() != 1:
            raise invalid_param(f"Tensor.item: a tensor of {self.numel()} elements is not one number")
        return self.numpy().item()

    def tolist(self) -> Any:
        return self.numpy().tolist()

    def type(self, dtype: Any) -> Tensor:
        """Cast (ONNX Cast, launched like any op)."""
        from graphexec.npu.ops import cast

        return cast(self, device_dtype(dtype, "Tensor.type"))

    def copy_(self, src: Any) -> Tensor:
        """Copy ``src`` (a tensor or number, broadcast) into this tensor's bytes, in stream order."""
        from graphexec.npu._copy import copy_into

        copy_into(self, src)
        return self

    def record_stream(self, stream: Any) -> None:
        """Mark the storage as used by ``stream``: when freed, its block waits for that stream."""
        from graphexec.npu._streams import Stream

        if not isinstance(stream, Stream):
            raise GraphExecError(f"record_stream needs an npu.Stream, got {type(stream).__name__}")
        card = self.card()
        if stream.card is not card:
            raise DeviceError(f"record_stream: the tensor is on {card.name}, the stream on {stream.card.name}")
        assert self._store is not None  # card() checked it
        card.allocator.note_use(self._store.ptr, stream.rt)

    # ---- views -----------------------------------------------------------------------
    def __getitem__(self, key: Any) -> Tensor:
        keys = key if isinstance(key, tuple) else (key,)
        if not all(k is None or k is Ellipsis or isinstance(k, (int, slice, np.integer)) for k in keys):
            raise GraphExecError("npu.Tensor indexing takes ints, slices, None and ...; "
                                 "use npu.ops.gather for index tensors")
        if self._store is not None:
            self.card()
        try:
            return Tensor(self._arr[key], self._store)
        except IndexError as e:
            raise GraphExecError(f"index {key!r} into shape {list(self.shape)}: {e}") from None

    def __setitem__(self, key: Any, value: Any) -> None:
        self[key].copy_(value)

    def reshape(self, *shape: Any) -> Tensor:
        from graphexec.npu.ops import reshape

        dims = shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
        return reshape(self, value_of(dims, np.dtype(np.int64), "Tensor.reshape"))

    view = reshape

    def relu(self) -> Tensor:
        return self._op("Relu", self)

    # ---- operators (ONNX ops through the kernels, like any op) ------------------------
    def _op(self, op: str, *args: Any) -> Any:
        return RUN_OP[0](op, list(args), {})

    def __add__(self, o: Any) -> Any: return BINARY[0]("Add", self, o)
    def __radd__(self, o: Any) -> Any: return BINARY[0]("Add", o, self)
    def __sub__(self, o: Any) -> Any: return BINARY[0]("Sub", self, o)
    def __rsub__(self, o: Any) -> Any: return BINARY[0]("Sub", o, self)
    def __mul__(self, o: Any) -> Any: return BINARY[0]("Mul", self, o)
    def __rmul__(self, o: Any) -> Any: return BINARY[0]("Mul", o, self)
    def __truediv__(self, o: Any) -> Any: return BINARY[0]("Div", self, o)
    def __rtruediv__(self, o: Any) -> Any: return BINARY[0]("Div", o, self)
    def __matmul__(self, o: Any) -> Any: return RUN_OP[0]("MatMul", [self, o], _NO_ATTRS)
    def __rmatmul__(self, o: Any) -> Any: return RUN_OP[0]("MatMul", [o, self], _NO_ATTRS)
    def __pow__(self, o: Any) -> Any: return BINARY[0]("Pow", self, o)
    def __neg__(self) -> Any: return self._op("Neg", self)
    def __abs__(self) -> Any: return self._op("Abs", self)
    def __lt__(self, o: Any) -> Any: return BINARY[0]("Less", self, o)
    def __le__(self, o: Any) -> Any: return BINARY[0]("LessOrEqual", self, o)
    def __gt__(self, o: Any) -> Any: return BINARY[0]("Greater", self, o)
    def __ge__(self, o: Any) -> Any: return BINARY[0]("GreaterOrEqual", self, o)
    def __eq__(self, o: Any) -> Any: return BINARY[0]("Equal", self, o)  # type: ignore[override]

    def __ne__(self, o: Any) -> Any:  # type: ignore[override]
        return self._op("Not", BINARY[0]("Equal", self, o))
