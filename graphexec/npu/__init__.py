"""Eager mode shaped like torch.npu: ``import graphexec.npu as npu``.

Tensors live on the emulated cards (``"npu:N"``) in blocks of a per-device caching
allocator with PyTorch's rules; every op (any ONNX op, through graph mode's kernels and
cost rules) is launched onto the current stream and returns at once; ``.cpu()``,
``.numpy()`` and ``npu.synchronize()`` wait. Streams, events, the memory_* calls,
``Module`` (a compiled graph run as one launch), ``NPUGraph`` capture and replay and the
profiler follow torch_npu's names and arguments.

Example (the runtime article's prefetch):
    >>> import graphexec.npu as npu
    >>> npu.set_stream(npu.Stream(stream_id=0))
    >>> with npu.stream(npu.Stream(stream_id=1)):
    ...     next_input = npu.randn(64, 64, device="cpu").npu()
    >>> current_output = model(current_input)
    >>> npu.synchronize()
"""

from __future__ import annotations

from graphexec.npu import _entries, ops, profiler
from graphexec.npu._devices import (
    current_device,
    device_count,
    get_device_name,
    hazards,
    init,
    is_available,
    reset_device,
    set_device,
    timeline,
)
from graphexec.npu._factories import empty, from_numpy, full, manual_seed, ones, rand, randn, tensor, zeros
from graphexec.npu._functions import (
    abs,
    arange,
    argmax,
    cat,
    clamp,
    concat,
    exp,
    flatten,
    full_like,
    log,
    log_softmax,
    matmul,
    mean,
    mm,
    ones_like,
    permute,
    relu,
    reshape,
    sigmoid,
    softmax,
    sqrt,
    stack,
    sum,
    tanh,
    transpose,
    where,
    zeros_like,
)
from graphexec.npu._graphs import Module, NPUGraph, graph
from graphexec.npu._streams import (
    Event,
    Stream,
    current_stream,
    default_stream,
    get_stream_limit,
    reset_stream_limit,
    set_stream,
    set_stream_limit,
    stream,
    synchronize,
)
from graphexec.npu._tensor import Tensor, device
from graphexec.npu.memory import (
    empty_cache,
    max_memory_allocated,
    max_memory_reserved,
    mem_get_info,
    memory_allocated,
    memory_reserved,
    memory_stats,
    memory_summary,
    reset_max_memory_allocated,
    reset_peak_memory_stats,
)

__all__ = [
    "Event", "Module", "NPUGraph", "Stream", "Tensor", "current_device", "current_stream", "default_stream",
    "device", "device_count", "empty", "empty_cache", "from_numpy", "full", "get_device_name", "get_stream_limit",
    "graph", "hazards", "init", "is_available", "manual_seed", "max_memory_allocated", "max_memory_reserved",
    "mem_get_info", "memory_allocated", "memory_reserved", "memory_stats", "memory_summary", "ones", "ops",
    "profiler", "rand", "randn", "reset_device", "reset_max_memory_allocated", "reset_peak_memory_stats",
    "reset_stream_limit", "set_device", "set_stream", "set_stream_limit", "stream", "synchronize", "tensor",
    "timeline", "zeros",
    # torch's functions (``_functions.py``)
    "abs",
    "arange",
    "argmax",
    "cat",
    "clamp",
    "concat",
    "exp",
    "flatten",
    "full_like",
    "log",
    "log_softmax",
    "matmul",
    "mean",
    "mm",
    "ones_like",
    "permute",
    "relu",
    "reshape",
    "sigmoid",
    "softmax",
    "sqrt",
    "stack",
    "sum",
    "tanh",
    "transpose",
    "where",
    "zeros_like",
]

_entries.check_entries(globals(), __all__, (Tensor, Stream, Event))
