"""The caching allocator's numbers, named as torch_npu.npu.memory names them.

Each card has a caching allocator with PyTorch's rules (``runtime/caching.py``, TORCH,
adjusted by PYTORCH_NPU_ALLOC_CONF when the card is opened). Counts are bytes of blocks:
``memory_allocated`` the blocks tensors hold (rounded to 512 bytes), ``memory_reserved``
the segments taken from the device, kept when tensors are freed until ``empty_cache``.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from graphexec.npu._state import STATE, Card, parse_device
from graphexec.runtime.caching import STAT_NAMES, CachingAllocator

_POOLS = ("all", "small_pool", "large_pool")
_KINDS = ("current", "peak", "allocated", "freed")


def _alloc(device: Any) -> CachingAllocator:
    index = parse_device(device)
    card: Card = STATE.card(index if index is not None else STATE.current_device)
    card.check()
    return card.allocator


def memory_allocated(device: Any = None) -> int:
    return _alloc(device).counter("allocated_bytes")[0]


def max_memory_allocated(device: Any = None) -> int:
    return _alloc(device).counter("allocated_bytes")[1]


def memory_reserved(device: Any = None) -> int:
    return _alloc(device).counter("reserved_bytes")[0]


def max_memory_reserved(device: Any = None) -> int:
    return _alloc(device).counter("reserved_bytes")[1]


def memory_stats(device: Any = None) -> OrderedDict[str, int]:
    """``"<stat>.<pool>.<current|peak|allocated|freed>"`` for allocation, segment, active,
    allocated_bytes, reserved_bytes, active_bytes and requested_bytes, plus num_alloc_retries
    and num_ooms, sorted by key as torch returns them."""
    alloc = _alloc(device)
    out: dict[str, int] = {"num_alloc_retries": alloc.retries, "num_ooms": alloc.ooms}
    for name in STAT_NAMES:
        for pool in _POOLS:
            for kind, value in zip(_KINDS, alloc.counter(name, pool)):
                out[f"{name}.{pool}.{kind}"] = value
    return OrderedDict(sorted(out.items()))


def memory_summary(device: Any = None, abbreviated: bool = False) -> str:
    """A table of the counters, one row per stat and pool (torch.npu.memory_summary's shape)."""
    stats = memory_stats(device)
    index = parse_device(device)
    lines = [f"graphexec.npu memory summary, device npu:{index}",
             f"{'metric':<32}{'cur usage':>14}{'peak usage':>14}{'tot alloc':>14}{'tot freed':>14}"]
    for name in STAT_NAMES:
        for pool in (_POOLS[:1] if abbreviated else _POOLS):
            row = [stats[f"{name}.{pool}.{k}"] for k in _KINDS]
            lines.append(f"{name + ' (' + pool + ')':<32}" + "".join(f"{_fmt(name, v):>14}" for v in row))
    lines.append(f"alloc retries: {stats['num_alloc_retries']}    OOMs: {stats['num_ooms']}")
    return "\n".join(lines)


def _fmt(name: str, v: int) -> str:
    if not name.endswith("_bytes"):
        return str(v)
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(v) >= size:
            return f"{v / size:.1f} {unit}"
    return f"{v} B"


def empty_cache() -> None:
    """Give every wholly free cached segment of the current device back to it."""
    _alloc(None).empty_cache()
    STATE.card().forget_segments()


def reset_peak_memory_stats(device: Any = None) -> None:
    _alloc(device).reset_peaks()


def reset_max_memory_allocated(device: Any = None) -> None:
    reset_peak_memory_stats(device)


def mem_get_info(device: Any = None) -> tuple[int, int]:
    """(free, total) bytes of the device's HBM, as the runtime sees it."""
    mem = _alloc(device).dev.memory
    return mem.capacity - mem.used, mem.capacity
