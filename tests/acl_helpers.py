"""Small ACL-style helpers shared by the runtime tests."""

from __future__ import annotations

import numpy as np

from graphexec import acl
from graphexec.acl.state import STATE

MB = 1024 * 1024


def clean_acl() -> None:
    """Finalize the ACL state if a test left it initialized."""
    if STATE.initialized:
        acl.finalize()


def scale(src: int, dst: int, n: int, k: float) -> None:
    """A kernel body: dst = src * k over n float32 values."""
    acl.view(dst, np.float32, (n,))[...] = acl.view(src, np.float32, (n,)) * k


def upload(arr: np.ndarray) -> int:
    ptr = acl.malloc(arr.nbytes)
    acl.memcpy(ptr, arr.nbytes, arr, arr.nbytes, acl.MEMCPY_HOST_TO_DEVICE)
    return ptr


def download(ptr: int, n: int) -> np.ndarray:
    out = np.empty(n, np.float32)
    acl.memcpy(out, out.nbytes, ptr, out.nbytes, acl.MEMCPY_DEVICE_TO_HOST)
    return out


def kernels(stream_id: int) -> list:
    """Finished kernel tasks of one stream of the current device."""
    return [t for t in acl.emulated_device().sim.finished if t.kind == "kernel" and t.stream.id == stream_id]
