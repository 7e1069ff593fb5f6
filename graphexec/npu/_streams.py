"""Streams and events shaped like torch_npu.npu.streams, over the runtime's.

``Stream(device=None, priority=0, stream_id=None)``: a new stream of the device, or with
``stream_id`` the device's stream of that id (0 is the default stream), made on first
use. torch priorities 0 and above are normal, below 0 high (the runtime runs a high
stream's blocks first). ``Event(enable_timing=False)`` is made on the device of the
stream it is first recorded on; ``elapsed_time`` is in milliseconds of simulated time.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

from graphexec.errors import DeviceError, GraphExecError
from graphexec.npu import _launch
from graphexec.npu._state import HIGH, NORMAL, STATE, Card, parse_device
from graphexec.runtime.codes import RT_EVENT_NOT_COMPLETE, RT_STREAM_CONTEXT, acl_error, invalid_handle
from graphexec.runtime.stream import Event as RtEvent
from graphexec.runtime.stream import Stream as RtStream


def _card(device: Any) -> Card:
    index = parse_device(device)
    if index is None:
        raise DeviceError("streams belong to an npu device, not the cpu")
    return STATE.card(index)


class Stream:
    """A stream of one card: a FIFO of launched work (torch.npu.Stream)."""

    def __init__(self, device: Any = None, priority: int = 0, stream_id: int | None = None, **kwargs: Any) -> None:
        if isinstance(priority, bool) or not isinstance(priority, int):
            raise GraphExecError(f"Stream priority must be an int, got {priority!r}")
        unknown = sorted(set(kwargs) - {"device_index", "device_type"})
        if unknown:
            raise GraphExecError(f"Stream() got unexpected argument(s) {', '.join(unknown)}; it takes device, "
                                 "priority, stream_id, device_index, device_type")
        card = _card(kwargs.get("device_index", device))
        level = HIGH if priority < 0 else NORMAL
        if stream_id is None:
            rt = card.device.create_stream(level)
            card.streams[rt.id] = rt
        elif isinstance(stream_id, bool) or not isinstance(stream_id, int) or stream_id < 0:
            raise GraphExecError(f"stream_id must be an int >= 0, got {stream_id!r}")
        else:
            rt = card.stream_by_id(stream_id, level)
        self.card, self.rt = card, rt

    @classmethod
    def _wrap(cls, card: Card, rt: RtStream) -> Stream:
        s = cls.__new__(cls)
        s.card, s.rt = card, rt
        return s

    def check(self) -> RtStream:
        self.card.check()
        if self.rt.destroyed:
            raise invalid_handle(f"stream {self.rt.id} of {self.card.name} was destroyed")
        return self.rt

    @property
    def stream_id(self) -> int:
        return self.rt.id

    @property
    def device(self) -> str:
        return self.card.name

    @property
    def priority(self) -> int:
        return -1 if self.rt.priority == HIGH else 0

    def wait_event(self, event: Event) -> None:
        """Work launched later on this stream waits for ``event``'s newest record (the arguments'
        kinds are checked by ``_entries.py``, from the annotations, for every public entry)."""
        rt = self.check()
        if event.rt is None or not event.recorded:
            return   # never recorded: nothing to wait for, as in torch
        ev, card = event.rt, self.card
        if event.card is not card:   # its record is on another simulator's clock: nothing would wake the wait
            if event.card is not None:
                event.card.check()
            raise acl_error(RT_STREAM_CONTEXT, f"Stream.wait_event: the event was recorded on "
                            f"{event.card.name if event.card else '?'}, the stream is on {card.name}")
        _launch.submit(card, lambda: card.device.stream_wait_event(rt, ev))

    def wait_stream(self, stream: Stream) -> None:
        """Work launched later on this stream waits for all work launched so far on ``stream``."""
        self.wait_event(stream.record_event())

    def record_event(self, event: Event | None = None) -> Event:
        event = event if event is not None else Event()
        event.record(self)
        return event

    def query(self) -> bool:
        """Whether all work launched on the stream has finished by the host's clock."""
        rt = self.check()
        dev = self.card.device
        with _launch.waiting(self.card):
            dev.sim.advance_to(dev.host_t)
        return rt.pending == 0

    def synchronize(self) -> None:
        rt = self.check()
        with _launch.waiting(self.card):
            self.card.device.synchronize_stream(rt)
        _launch.raise_faults(self.card)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Stream) and other.rt is self.rt

    def __hash__(self) -> int:
        return hash((self.card.index, self.rt.id))

    def __repr__(self) -> str:
        return f"<npu.Stream device={self.device} stream_id={self.stream_id}>"


class Event:
    """A marker in a stream (torch.npu.Event); ``blocking`` and ``interprocess`` are accepted."""

    def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False) -> None:
        self.enable_timing = enable_timing
        self.card: Card | None = None
        self.rt: RtEvent | None = None
        self.recorded = False   # a record was launched or captured (a captured one has no record task yet)

    def record(self, stream: Stream | None = None) -> None:
        stream = stream if stream is not None else current_stream()
        rt = stream.check()
        card = stream.card
        if self.rt is None:
            self.card, self.rt = card, card.device.create_event()
        elif self.card is not None and self.card is not card:
            raise DeviceError(f"event was made on {self.card.name}, recorded now on {card.name}")
        ev = self.rt
        _launch.submit(card, lambda: card.device.record_event(ev, rt))
        self.recorded = True

    def wait(self, stream: Stream | None = None) -> None:
        (stream if stream is not None else current_stream()).wait_event(self)

    def query(self) -> bool:
        if self.card is None or self.rt is None:
            return True
        self.card.check()
        with _launch.waiting(self.card):
            return self.card.device.event_complete(self.rt)

    def synchronize(self) -> None:
        if self.card is not None and self.rt is not None:
            self.card.check()
            with _launch.waiting(self.card):
                self.card.device.synchronize_event(self.rt)
            _launch.raise_faults(self.card)

    def elapsed_time(self, end_event: Event) -> float:
        """Milliseconds of simulated time from this event's record to ``end_event``'s."""
        if not (self.enable_timing and end_event.enable_timing):
            raise GraphExecError("elapsed_time needs both events made with enable_timing=True")
        if self.rt is None or end_event.rt is None or self.rt.record_task is None or \
                end_event.rt.record_task is None:
            raise GraphExecError("elapsed_time needs both events recorded first")
        if not (self.query() and end_event.query()):
            raise acl_error(RT_EVENT_NOT_COMPLETE, "synchronize the events before reading elapsed_time")
        return (end_event.rt.record_task.end_t - self.rt.record_task.end_t) / 1000.0


def current_stream(device: Any = None) -> Stream:
    card = _card(device)
    return Stream._wrap(card, card.current)


def default_stream(device: Any = None) -> Stream:
    card = _card(device)
    return Stream._wrap(card, card.device.default_stream)


def set_stream(stream: Stream) -> None:
    """Make ``stream`` its device's current stream (torch_npu.npu.set_stream)."""
    if not isinstance(stream, Stream):
        raise GraphExecError(f"set_stream needs an npu.Stream, got {type(stream).__name__}")
    stream.card.current = stream.check()


@contextmanager
def stream(s: Stream | None) -> Iterator[Stream | None]:
    """``with npu.stream(s):`` work launched meanwhile on ``s``'s device goes to ``s``."""
    if s is None:
        yield None
        return
    card = s.card
    before, current = STATE.current_device, card.current
    card.current = s.check()
    STATE.current_device = card.index
    try:
        yield s
    finally:
        card.current, STATE.current_device = current, before


def synchronize(device: Any = None) -> None:
    """Wait for all work on the device (torch.npu.synchronize)."""
    card = _card(device)
    card.check()
    with _launch.waiting(card):
        card.device.synchronize_device()
    _launch.raise_faults(card)


def set_stream_limit(stream: Stream, cube_num: int = -1, vector_num: int = -1) -> None:
    """Cap the AI cores the stream's kernels may hold at once (torch_npu.npu.set_stream_limit)."""
    stream.check()
    prof = stream.card.device.profile
    limit: dict[str, int] = {}
    for unit, n, most in (("cube", cube_num, prof.ai_cores), ("vector", vector_num, prof.vector_cores)):
        if isinstance(n, bool) or not isinstance(n, int) or n == 0 or n < -1 or n > most:
            raise GraphExecError(f"set_stream_limit: {unit}_num must be -1 (no cap) or 1..{most}, got {n!r}")
        if n > 0:
            limit[unit] = n
    stream.card.device.flush()   # launches held on a full queue were made under the old cap
    stream.rt.core_limit = limit or None


def get_stream_limit(stream: Stream) -> dict[str, int]:
    prof, limit = stream.card.device.profile, stream.rt.core_limit or {}
    return {"cube_core_num": limit.get("cube", prof.ai_cores),
            "vector_core_num": limit.get("vector", prof.vector_cores)}


def reset_stream_limit(stream: Stream) -> None:
    stream.check()
    stream.card.device.flush()
    stream.rt.core_limit = None
