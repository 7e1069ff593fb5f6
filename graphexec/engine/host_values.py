"""Sequences, maps and optionals hold tensors on the host; those tensors must be their own.

SequenceInsert (and every container op through the reference) keeps the very array it read,
which is a view of a device buffer: once the memory plan gives those bytes to a later tensor,
or a loop body's next iteration rewrites them, the sequence would change under it (a
SequenceInsert, three ops, then another: its first element read back as the later tensor).
"""

from __future__ import annotations

from typing import Any

import numpy as np


def owned(value: Any) -> Any:
    """``value`` with every array it holds that is a view (of device memory) copied; arrays
    that own their data are kept, so a sequence that grows by one tensor copies one tensor."""
    if isinstance(value, np.ndarray):
        return value if value.base is None else np.array(value, copy=True)
    if isinstance(value, list):
        return [owned(v) for v in value]
    if isinstance(value, dict):
        return {k: owned(v) for k, v in value.items()}
    return value


def held_bytes(value: Any) -> int:
    """The bytes of the tensors ``value`` holds (a tensor's own; a container's, nested)."""
    if isinstance(value, np.ndarray):
        return int(value.nbytes)
    if isinstance(value, list):
        return sum(held_bytes(v) for v in value)
    if isinstance(value, dict):
        return sum(held_bytes(v) for v in value.values())
    return 0
