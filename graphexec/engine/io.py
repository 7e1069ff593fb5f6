"""A run's copies in and out: feeds to the plan's input bytes, outputs to the host, or
outputs kept on the device (``engine/device_tensor.py``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from graphexec import _switch
from graphexec.engine.device_tensor import DeviceTensor, check_on
from graphexec.engine.executor import ExecContext
from graphexec.runtime.copies import host_copies


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


def feed_all(device: Any, ctx: ExecContext, feeds: dict[str, Any], compute: bool = True) -> None:
    """Every feed into its input's bytes: arrays that fit their planned views exactly as one
    batch of host copies (``runtime/copies.py``) where the fast paths are on; else, or with
    anything else among them, each as ``feed`` copies it (the plain reference)."""
    pairs = _pairs(ctx, feeds) if compute and _switch.FAST else None
    if pairs is not None:
        host_copies(device, "h2d", pairs)
        return
    for name, value in feeds.items():
        feed(device, ctx, name, value, compute)


def _pairs(ctx: ExecContext, feeds: dict[str, Any]) -> list[tuple[np.ndarray, np.ndarray]] | None:
    """(planned view, array) per feed; None unless each is an array of its view's shape and dtype."""
    views, where, pairs = ctx.views, ctx.where, []
    for name, value in feeds.items():
        view = views.get(name) if name in where else None
        if type(value) is not np.ndarray or view is None or view.shape != value.shape or view.dtype != value.dtype:
            return None
        pairs.append((view, value))
    return pairs


def fetch_all(device: Any, ctx: ExecContext, names: list[str], kept: frozenset[str] = frozenset(),
              compute: bool = True) -> dict[str, Any]:
    """Every output ``names`` once the device has synchronized: arrays as one batch of host
    copies where the fast paths are on and nothing is kept on the device; else each as
    ``fetch``/``keep`` gives it."""
    if compute and not kept and _switch.FAST:
        values = [ctx.read(name) for name in names]
        if all(type(v) is np.ndarray for v in values):
            # a new C-ordered array each, as np.empty and a copy into it make, in one call instead of two:
            # the device has synchronized, so the bytes are final (``host_copies`` moves the clock only)
            outs = [v.copy() for v in values]
            host_copies(device, "d2h", list(zip(outs, values)), moved=True)
            return dict(zip(names, outs))
    return {name: keep(device, ctx, name) if name in kept else fetch(device, ctx, name, compute) for name in names}

