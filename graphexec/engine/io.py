"""A run's copies in and out: feeds to the plan's input bytes, outputs to the host, or
outputs kept on the device (``engine/device_tensor.py``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from graphexec.engine.device_tensor import DeviceTensor, check_on
from graphexec.engine.executor import ExecContext


def _nothing() -> None:
    """A timing-only copy: it costs its time, no byte moves."""


def feed(device: Any, ctx: ExecContext, name: str, value: Any, compute: bool = True) -> None:
    """``value`` into input ``name``'s planned bytes: from the host, or device to device
    from a DeviceTensor kept by an earlier run."""
    loc = ctx.where.get(name)
    resident = isinstance(value, DeviceTensor)
    if resident:
        check_on(value, device, name)
    if loc is None or not (resident or isinstance(value, np.ndarray)):
        ctx.host[name] = value.numpy() if resident else value
        return
    kind = "d2d" if resident else "h2d"
    if not compute:   # the copy's cost alone: no view to write into
        device.memcpy_sync(value.nbytes, kind, _nothing)
        return
    view = device.view(loc.ptr, loc.dtype, loc.shape)
    src = value.view() if resident else value
    device.memcpy_sync(value.nbytes, kind, lambda: view.__setitem__(..., src))


def fetch(device: Any, ctx: ExecContext, name: str, compute: bool = True) -> Any:
    """The output copied to the host; timing-only, the copy's cost alone (the planned
    view or constant gives its size)."""
    value = ctx.read(name)
    if not isinstance(value, np.ndarray):
        return value
    if not compute:
        device.memcpy_sync(value.nbytes, "d2h", _nothing)
        return None
    out = np.empty(value.shape, value.dtype)
    device.memcpy_sync(value.nbytes, "d2h", lambda: out.__setitem__(..., value))
    return out


def keep(device: Any, ctx: ExecContext, name: str) -> Any:
    """The output left on the device, in bytes of its own (a value that is not a tensor
    goes to the host as ``fetch`` gives it)."""
    value = ctx.read(name)
    if not isinstance(value, np.ndarray):
        return value
    return DeviceTensor(device, value, name)
