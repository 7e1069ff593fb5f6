"""PYTORCH_NPU_ALLOC_CONF: the allocator options torch_npu reads from the environment.

``key:value`` pairs separated by commas, as in PyTorch's PYTORCH_CUDA_ALLOC_CONF. Those
that mean something on the emulated device are applied (``max_split_size_mb``,
``expandable_segments``); ``garbage_collection_threshold`` and
``roundup_power2_divisions`` are accepted and change nothing here; anything else is
refused with one line, as torch_npu refuses an unknown option.
"""

from __future__ import annotations

from dataclasses import replace

from graphexec.errors import DeviceError
from graphexec.runtime.caching import TORCH, Rules

MiB = 1024 * 1024
_IGNORED = ("garbage_collection_threshold", "roundup_power2_divisions")


def alloc_rules(conf: str) -> Rules:
    """The torch allocator rules under ``conf`` (the variable's value)."""
    rules = TORCH
    for item in filter(None, (p.strip() for p in conf.split(","))):
        key, sep, value = (s.strip() for s in item.partition(":"))
        if not sep or not value:
            raise DeviceError(f"PYTORCH_NPU_ALLOC_CONF: {item!r} is not key:value")
        if key == "max_split_size_mb":
            if not value.isdigit() or int(value) <= 20:
                raise DeviceError(f"PYTORCH_NPU_ALLOC_CONF: max_split_size_mb must be an int > 20, got {value!r}")
            rules = replace(rules, max_split_size=int(value) * MiB)
        elif key == "expandable_segments":
            if value not in ("True", "False"):
                raise DeviceError(f"PYTORCH_NPU_ALLOC_CONF: expandable_segments must be True or False, got {value!r}")
            rules = replace(rules, expandable=value == "True")
        elif key not in _IGNORED:
            raise DeviceError(f"PYTORCH_NPU_ALLOC_CONF: unknown option {key!r} "
                              f"(known: max_split_size_mb, expandable_segments, {', '.join(_IGNORED)})")
    return rules
