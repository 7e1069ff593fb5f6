"""Tensors that stay on the device between runs (ONNX Runtime's I/O binding; a torch_npu
user keeps tensors on ``npu``).

A run can leave chosen outputs on the device (``Session.run(feeds, keep=[...])``): each is
copied device to device out of the plan's io bytes (which the next run overwrites) into
bytes of its own, a :class:`DeviceTensor`. Fed back to a later run on the same device it
is copied device to device into that plan's input bytes: no host copy on the timeline,
as a decode loop keeps its KV cache on the device from step to step.
"""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np

from graphexec.errors import FeedError


class DeviceTensor:
    """Bytes on one device holding a tensor; ``numpy()`` copies it to the host."""

    def __init__(self, device: Any, value: np.ndarray, name: str = "") -> None:
        self.device, self.name = device, name
        self.dtype, self.shape = value.dtype, tuple(value.shape)
        self.nbytes = int(value.nbytes)
        self.ptr = device.memory.alloc(self.nbytes, tag="resident")
        self._free = weakref.finalize(self, _free, device, self.ptr)
        view = self.view()
        device.memcpy_sync(self.nbytes, "d2d", lambda: view.__setitem__(..., value), name=f"keep {name}")

    def view(self) -> np.ndarray:
        """The device bytes as an array (no copy, no time)."""
        return self.device.view(self.ptr, self.dtype, self.shape)

    def numpy(self) -> np.ndarray:
        """A host copy, on the device's clock as any copy to the host."""
        out = np.empty(self.shape, self.dtype)
        view = self.view()
        self.device.memcpy_sync(self.nbytes, "d2h", lambda: out.__setitem__(..., view))
        return out

    def free(self) -> None:
        """Give the bytes back now (otherwise when the tensor is collected)."""
        self._free()

    def __repr__(self) -> str:
        return f"DeviceTensor({self.name!r}, {self.dtype}{list(self.shape)}, device {self.device.id})"


def _free(device: Any, ptr: int) -> None:
    device.memory.free(ptr)


def check_on(value: DeviceTensor, device: Any, name: str) -> None:
    """A device tensor feeds only a run on its own device."""
    if value.device is not device:
        raise FeedError(f"input {name!r}: a DeviceTensor of device {value.device.id} of another session; "
                        "feed it where it was kept, or pass value.numpy()")
    if not value._free.alive:
        raise FeedError(f"input {name!r}: its DeviceTensor was freed")
