"""Moving bytes: uploads, downloads, copies on one card and between cards.

An upload stages the host array (the host copies it aside, as cudaMemcpyAsync from
pageable memory does) and runs on the current stream without the host waiting; a
download runs on the current stream and the host waits for it. A copy between cards
runs on the source card's current stream over the server's links (peer access turned
on where the system allows it), and the destination's current stream waits for it
through an event, so what it launches next sees the bytes.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.lib.array_utils import byte_bounds

from graphexec.errors import DeviceError
from graphexec.npu import _launch
from graphexec.npu._checks import device_dtype, value_of
from graphexec.npu._state import STATE, Card
from graphexec.npu._tensor import Storage, Tensor


def empty_on(card: Card, dtype: np.dtype, shape: tuple[int, ...]) -> Tensor:
    """A new tensor on ``card`` from its allocator, for the current stream (bytes as found)."""
    if not card.alive:
        card.check()
    dt = device_dtype(dtype, "a tensor on " + card.name)   # every way onto a card comes here
    store = Storage(card, math.prod(shape) * dt.itemsize, card.current)
    if STATE.capture is not None:
        STATE.capture.keep(store)
    return Tensor(store.view(dt, shape), store)


def span(t: Tensor, name: str = "") -> tuple[int, int, str]:
    """(ptr, nbytes, name) of the bytes a device tensor's view covers, for the hazard checker."""
    store = t._store
    assert store is not None
    lo, hi = byte_bounds(t._arr)
    base = store.data.__array_interface__["data"][0] + store.offset
    ptr = store.ptr + (lo - base)
    return ptr, max(hi - lo, 0), name or f"{ptr:#x}"


def _checked(card: Card) -> bool:
    return card.device.checker is not None


def upload(src: np.ndarray, card: Card) -> Tensor:
    out = empty_on(card, src.dtype, src.shape)
    data = _launch.stage(card, src)
    view = out._arr
    _launch.copy(card, card.current, "h2d", data.nbytes, lambda: data, lambda d: view.__setitem__(..., d),
                 writes=[span(out)] if _checked(card) else ())
    return out


def download(t: Tensor) -> Tensor:
    card = t.card()
    view = t._arr
    out = np.empty(view.shape, view.dtype)
    stream = card.current
    _launch.copy(card, stream, "d2h", out.nbytes, view.copy, lambda d: out.__setitem__(..., d),
                 reads=[span(t)] if _checked(card) else ())
    with _launch.waiting(card):
        card.device.synchronize_stream(stream)
    _launch.raise_faults(card)
    return Tensor(out)


def to_device(t: Tensor, index: int | None) -> Tensor:
    """``t`` on card ``index`` (None: the host); ``t`` itself when already there."""
    here = None if t._store is None else t._store.card.index
    if index == here:
        if t._store is not None:
            t.card()
        return t
    if index is None:
        return download(t)
    if t._store is None:
        return upload(t._arr, STATE.card(index))
    return between_cards(t, STATE.card(index))


def between_cards(t: Tensor, dst: Card) -> Tensor:
    src = t.card()
    server = STATE.server
    if server is None:
        raise DeviceError(f"copy from {src.name} to {dst.name}: cards share no links unless "
                          "npu.init(system=...) names a server")
    if server.system.peer_capable(src.index, dst.index):
        server.peers.add((src.index, dst.index))   # torch_npu enables peer access where it can
    out = empty_on(dst, t.dtype, t.shape)
    view, dview, stream = t._arr, out._arr, src.current
    reads, writes = ([span(t)], [span(out)]) if _checked(src) else ([], [])

    def launch() -> None:   # a task of its own per launch: a captured graph's replays each move the bytes
        src.device.launch(server.copy_task(stream, src.index, src.index, dst.index, view.nbytes, view.copy,
                                           lambda d: dview.__setitem__(..., d), reads, writes))

    _launch.submit(src, launch)
    ev = src.device.create_event()
    _launch.submit(src, lambda: src.device.record_event(ev, stream))
    wait_on = dst.current   # the stream current now: a captured copy's replay must not ask again
    _launch.submit(dst, lambda: dst.device.stream_wait_event(wait_on, ev))
    return out


def copy_into(dst: Tensor, src: Any) -> None:
    """``dst[...] = src`` in stream order (a host destination is written at once)."""
    if dst._store is None:
        value = src.numpy() if isinstance(src, Tensor) else value_of(src, dst.dtype, "Tensor.copy_")
        try:
            dst._arr[...] = value
        except ValueError as e:
            raise DeviceError(f"copy_: a source of shape {list(value.shape)} does not broadcast to "
                              f"{list(dst.shape)} ({e})") from None
        return
    card = dst.card()
    if isinstance(src, Tensor):
        if src._store is None or src._store.card is not card:
            src = to_device(src, card.index)
        sview = src._arr
        read: Any = sview.copy
        reads = [span(src)] if _checked(card) else ()
    else:
        value = value_of(src, dst.dtype, "Tensor.copy_")
        read, reads = (lambda: value), ()
    view = dst._arr
    shape = src.shape if isinstance(src, Tensor) else value.shape
    try:
        if np.broadcast_shapes(shape, view.shape) != view.shape:
            raise ValueError
    except ValueError:
        raise DeviceError(f"copy_: a source of shape {list(shape)} does not broadcast to "
                          f"{list(view.shape)}") from None
    _launch.copy(card, card.current, "d2d", view.nbytes, read, lambda d: view.__setitem__(..., d),
                 reads, [span(dst)] if _checked(card) else ())
