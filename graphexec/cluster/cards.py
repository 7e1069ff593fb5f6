"""Several cards on one clock: compiled plans launched onto the devices of a server,
simulated together.

A single-device run (``Compiled.run``) starts its device's clock afresh and synchronizes
it alone. A multi-device run (:class:`CardsRun`) starts every card's clock once, then a
parallel mode (``cluster/spread.py``) launches onto it, in any order, without waiting:

- ``bind(card, plan)``: a run context with the plan's streams and events made on the
  card (``Compiled.bind``); ``again(ctx)`` a fresh context on the same streams, for the
  next micro-batch through the same plan;
- ``feed(ctx, feeds)``: host-to-device copies of the inputs on the card's copy stream,
  over its host link; returns the event recorded after them;
- ``launch(ctx, after)``: every stream of the plan waits on ``after``, then the plan's
  tasks; returns one event recorded at the end of each of its streams;
- ``fetch(ctx, names, after)``: device-to-host copies of values once ``after`` ran;
- ``copy(...)``: a copy between two cards over the server's links (``Server.copy_task``);
- ``finish()``: synchronize every card. Only now does simulated time move: the server's
  ``SimGroup`` steps the cards in one global time order.

Kernels compute at their simulated start and store at their end (``ExecContext.inline``,
as control-flow bodies do), copies read at their start and write at their end, so every
value moves in simulated-time order, across cards too. With ``timing=True`` nothing is
computed or copied (a timing-only run, for a mode's estimate).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, Callable, Mapping, Sequence, cast

import numpy as np

from graphexec.cluster.tape import CardsTape, Recorder, quiet
from graphexec.engine.compiled import Compiled
from graphexec.engine.executor import ExecContext
from graphexec.errors import AclError
from graphexec.runtime.device import Device
from graphexec.runtime.launch import LaunchContext, launch_all
from graphexec.runtime.server import Server, Transfer
from graphexec.runtime.sim import DeviceTask
from graphexec.runtime.stream import Event, Stream

WORK = ("kernel", "memcpy", "control", "hccl")   # the kinds a makespan spans


@dataclass
class Card:
    """One device of the run and the streams the run adds to its plans' (made on first
    use, after the plans' streams, so those keep the ids their schedule gives them):
    "copy" pulls values in, "send" stages them out, "comm" runs collectives."""

    index: int
    device: Device
    plans: list[Compiled] = field(default_factory=list)   # bound this run, in order
    _streams: dict[str, Stream] = field(default_factory=dict)

    def stream(self, role: str) -> Stream:
        got = self._streams.get(role)
        if got is None:
            if role != "copy":
                _ = self.copy_stream   # the copy stream keeps the first id after the plans'
            try:
                got = self.device.create_stream()
            except AclError:   # the plan took every stream the device has: share one
                got = self.device.default_stream if role == "copy" else self.copy_stream
            self._streams[role] = got
        return got

    @property
    def copy_stream(self) -> Stream:
        return self.stream("copy")


@dataclass(eq=False)
class Bound:
    """A plan bound to a card for one launch: its context (its streams and events)."""

    card: Card
    plan: Compiled
    ctx: ExecContext
    fetched: dict[str, Any] = field(default_factory=dict)   # name -> host array, filled by ``fetch``'s copies


@dataclass(frozen=True)
class Place:
    """Bytes on a card that a copy reads or writes: a bound plan's value, or a buffer
    of the run's own (``CardsRun.buffer``)."""

    card: Card
    ptr: int
    dtype: np.dtype
    shape: tuple[int, ...]
    name: str

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize

    def view(self) -> np.ndarray:
        return self.card.device.view(self.ptr, self.dtype, self.shape)


def planned(b: Bound, name: str) -> Place | None:
    """Where ``b``'s plan keeps value ``name`` (an input's buffer, or the bytes of the
    value an output or alias lives in); None for a value that never lives on the device."""
    loc = b.ctx.where.get(name)
    if loc is not None:
        return Place(b.card, loc.ptr, np.dtype(loc.dtype), tuple(loc.shape), name)
    root, off = b.plan.tasks.locate(name)
    base, t = b.ctx.where.get(root), b.plan.graph.values[name].type
    if base is None or not t.is_static:
        return None
    return Place(b.card, base.ptr + off, np.dtype(t.dtype), tuple(cast(int, d) for d in t.shape or ()), name)


class CardsRun:
    """One run over ``cards`` (device ids) of ``server``, every clock started afresh.

    With ``tape`` (a run of the same launches recorded it, ``cluster/tape.py``) that still
    fits the cards, the run launches nothing: its tasks' starts and ends are called in the
    tape's order at ``finish``. With ``record``, a run that simulates leaves its tape in
    ``recorded`` where nothing but its launches decided its timeline."""

    def __init__(self, server: Server, cards: Sequence[int], timing: bool = False, tape: CardsTape | None = None,
                 record: bool = False) -> None:
        self.server = server
        self.timing = timing
        self.cards: dict[int, Card] = {}
        for i in cards:
            dev = server.devices[i]
            dev.reset_run()
            self.cards[i] = Card(i, dev)
        server.group.now = 0.0   # every simulator is new: the group's clock starts with them
        self._bound: list[Bound] = []
        self._buffers: list[Place] = []
        devices = self._devices()
        self.tape = tape if tape is not None and not timing and tape.fits(devices) else None
        self._fns: list[tuple[Callable[[], Any] | None, Callable[[Any], None] | None]] = []   # a replay's tasks
        self._recorder = Recorder() if record and not timing and self.tape is None else None
        if self._recorder is not None and not all(quiet(d) for d in devices.values()):
            self._recorder.broken = "a hazard checker or the caching allocator's blocks"
        self.recorded: CardsTape | None = None

    def _devices(self) -> dict[int, Device]:
        return {i: c.device for i, c in self.cards.items()}

    def _task(self, start: Callable[[], Any] | None, end: Callable[[Any], None] | None
              ) -> tuple[Callable[[], Any] | None, Callable[[Any], None] | None] | None:
        """A task's start and end as the run gives them: None where a replay keeps them (the
        task is not launched), wrapped to log where the run records."""
        if self.tape is not None:
            self._fns.append((start, end))
            return None
        if self._recorder is not None:
            return self._recorder.wrap(start, end)
        return start, end

    def bind(self, card: int, plan: Compiled) -> Bound:
        """``plan`` (loaded on ``card``'s device) with its streams and events made now."""
        c = self.cards[card]
        assert plan.device is c.device, "a plan runs on the device it was loaded on"
        c.plans.append(plan)
        return self._keep(Bound(c, plan, plan.bind(not self.timing)))

    def again(self, bound: Bound) -> Bound:
        """A fresh context for the same plan on the same streams and events (the next
        micro-batch: a wait binds to the record launched just before it)."""
        ctx = bound.plan.context(not self.timing)
        ctx.streams, ctx.events = bound.ctx.streams, bound.ctx.events
        return self._keep(Bound(bound.card, bound.plan, ctx))

    def _keep(self, b: Bound) -> Bound:
        """``b`` computes during the simulation, its kernels through the plan's replay steps
        (``Steps.inline``: the single-card engine's fast path, plain KernelCalls where it ends)."""
        ctx = b.ctx
        ctx.inline = True
        steps = None if self.timing else b.plan.card_steps()
        if steps is not None:
            ctx.log = {}   # the kernels' starts and end are the ones given here
            ctx.starts, ctx.log_end = steps.inline(ctx)
        elif self._recorder is not None:
            self._recorder.broken = "a plan computes through its KernelCalls"
        if self._recorder is not None and b.plan.needs_values is not None:
            self._recorder.broken = b.plan.needs_values
        self._bound.append(b)
        return b

    def feed(self, b: Bound, feeds: Mapping[str, Any]) -> Event:
        """Copy the arrays of ``feeds`` into the plan's input buffers, on the copy stream."""
        for name, value in feeds.items():
            place = planned(b, name) if isinstance(value, np.ndarray) and name in b.ctx.where else None
            if place is None:
                b.ctx.host[name] = value
            else:
                self.upload(b.card.copy_stream, place, value)
        return self.record(b.card.device, b.card.copy_stream)

    def upload(self, stream: Stream, dst: Place, value: np.ndarray) -> DeviceTask | None:
        """A host-to-device copy of ``value`` into ``dst`` on ``stream`` (of ``dst``'s card)."""
        data = np.ascontiguousarray(value)
        return self._host_copy(dst.card, stream, "h2d", dst.name, data.nbytes, None if self.timing else _const(data),
                               None if self.timing else _setter(dst.view()), writes=[(dst.ptr, data.nbytes, dst.name)])

    def launch(self, b: Bound, after: Sequence[Event] = ()) -> list[Event]:
        """The plan's tasks, each of its streams first waiting on ``after``; the events
        recorded at the end of every one of its streams."""
        ctx, dev = b.ctx, b.card.device
        streams = list(ctx.streams.values())
        if self.tape is not None:   # its kernels' starts and end, in launch order
            end = ctx.log_end
            self._fns.extend((start, end) for start in ctx.starts or ())
            return [dev.create_event() for _ in streams]
        if self._recorder is not None and ctx.starts is not None and ctx.log_end is not None:
            ctx.starts, ctx.log_end = self._recorder.kernels(list(ctx.starts), ctx.log_end)
        for s in streams:
            for ev in after:
                dev.stream_wait_event(s, ev)
        if self.timing:   # no math: control tasks as opaque kernels (``LaunchContext``)
            launch_all(LaunchContext(device=dev, stream_of=ctx.stream_of, streams=ctx.streams, events=ctx.events),
                       b.plan.schedule.order)
        else:
            launch_all(ctx, b.plan.schedule.order)
        return [self.record(dev, s) for s in streams]

    def fetch(self, b: Bound, names: Sequence[str], after: Sequence[Event] = (), stream: Stream | None = None
              ) -> Event:
        """Copy ``names`` to the host once ``after`` ran (into ``b.fetched``), on ``stream``
        (the card's copy stream by default); values that never live on the device
        (constants, host objects) are read at ``finish``."""
        dev, stream = b.card.device, stream or b.card.copy_stream
        for ev in after if self.tape is None else ():
            dev.stream_wait_event(stream, ev)
        for name in names:
            root, _ = b.plan.tasks.locate(name)
            if b.plan.graph.values[root].const is not None:
                continue
            t = b.plan.graph.values[name].type
            nbytes = t.nbytes if t.is_static else 0
            made: list[DeviceTask] = []   # the task, for a size known only once read
            read, keep = (None, None) if self.timing else (_reader(b, name, made), _keeper(b.fetched, name))
            task = self._host_copy(b.card, stream, "d2h", name, nbytes, read, keep, reads=[])
            if task is not None:
                made.append(task)
        return self.record(dev, stream)

    def copy(self, src: Bound, src_name: str, dst: Bound, dst_name: str) -> DeviceTask | None:
        """A copy of ``src_name`` on ``src``'s card into the planned bytes of ``dst_name`` on
        ``dst``'s card, pulled on the destination's copy stream."""
        here = planned(dst, dst_name)
        assert here is not None, dst_name
        return self.move(dst.card, dst.card.copy_stream, planned(src, src_name) or (src, src_name), here)

    def buffer(self, card: Card, like: Place, name: str) -> Place:
        """A buffer of ``like``'s size on ``card`` for this run (freed by ``finish``)."""
        assert self.tape is None, "a run with buffers of its own records no tape"
        if self._recorder is not None:
            self._recorder.broken = "buffers of the run's own (the caching allocator)"
        ptr = card.device.allocator.malloc(max(1, like.nbytes), card.copy_stream)
        place = Place(card, ptr, like.dtype, like.shape, name)
        self._buffers.append(place)
        return place

    def move(self, issuer: Card, stream: Stream, src: Place | tuple[Bound, str], dst: Place) -> DeviceTask | None:
        """A copy into ``dst`` on ``stream`` of ``issuer``, of ``src``'s bytes or of a bound
        plan's value (read as the plan keeps it: on the host, or sized only at run time):
        on one card a device-to-device copy, between cards one over the server's links."""
        if isinstance(src, Place):
            card, reads, read = src.card, [(src.ptr, src.nbytes, src.name)], src.view
        else:
            b, name = src
            card, reads, read = b.card, [], (lambda: b.ctx.read(name))
        start: Callable[[], Any] = _none if self.timing else (lambda: np.array(read()))
        end: Callable[[Any], None] = _drop if self.timing else _setter(dst.view())
        fns = self._task(start, end)
        if fns is None:
            return None
        start, end = fns[0] or start, fns[1] or end
        writes = [(dst.ptr, dst.nbytes, dst.name)]
        if card is dst.card:
            task = DeviceTask("memcpy", stream, f"memcpy d2d {dst.name}", unit="copy", bytes=float(dst.nbytes),
                              copy_kind="d2d", start_fn=start, end_fn=end, reads=reads, writes=writes)
        else:
            task = self.server.copy_task(stream, issuer.index, card.index, dst.card.index, dst.nbytes, start,
                                         end, [], writes)
            task.name = f"{task.name} {dst.name}"   # the trace names the value
        issuer.device.launch(task)
        return task

    def wait(self, dev: Device, stream: Stream, event: Event) -> None:
        """``stream`` (of ``dev``) waits on ``event`` (a replay launches no wait)."""
        if self.tape is None:
            dev.stream_wait_event(stream, event)

    def collective(self, op: Any) -> None:
        """A collective's math (``op.compute``, called once every rank arrived) as a task of
        the run: logged where it records, kept in a replay. Then each rank's ``rank``."""
        compute = op.compute
        fns = self._task(lambda: compute(op.parts), None)
        math = None if fns is None else fns[0]
        if math is not None:
            op.compute = lambda parts: math()

    def rank(self, dev: Device, task: DeviceTask) -> None:
        """One rank's task of a collective launched on ``dev``; its landing (the task's end)
        a task of the run, kept instead in a replay."""
        fns = self._task(None, task.end_fn)
        if fns is not None:
            task.end_fn = fns[1]
            dev.launch(task)

    def record(self, dev: Device, stream: Stream) -> Event:
        """An event recorded on ``stream`` now (a replay's is never recorded: nothing waits)."""
        ev = dev.create_event()
        if self.tape is None:
            dev.record_event(ev, stream)
        return ev

    def _host_copy(self, card: Card, stream: Stream, kind: str, name: str, nbytes: int,
                   start: Callable[[], Any] | None, end: Callable[[Any], None] | None, reads: list | None = None,
                   writes: list | None = None) -> DeviceTask | None:
        """A copy over ``card``'s host link (its own channel of the fabric); None in a replay."""
        if not self.timing:
            fns = self._task(start, end)
            if fns is None:
                return None
            start, end = fns
        link = self.server.system.host_link(card.index)
        transfer = Transfer(self.server.fabric, [(link.channels, link.latency_us)], float(nbytes), link.kind)
        src, dst = ("host", card.index) if kind == "h2d" else (card.index, "host")
        task = DeviceTask("memcpy", stream, f"memcpy {kind} {name}", unit="copy", bytes=float(nbytes),
                          copy_kind=kind, start_fn=start, end_fn=end, reads=reads or [], writes=writes or [],
                          driver=transfer, meta={"link": link.kind, "src": src, "dst": dst})
        return card.device.launch(task)

    def finish(self) -> None:
        """Run every card to the end (one global time order), or replay the tape, then free
        run-time allocations."""
        devices = self._devices()
        if self.tape is not None:
            self.tape.replay(self._fns)
            self.tape.restore(devices)
        else:
            for card in self.cards.values():
                card.device.synchronize_device()
        for b in self._bound:
            for ptr in b.ctx.temp_segments:
                b.card.device.allocator.free(ptr)
            b.ctx.temp_segments.clear()
        for place in self._buffers:
            place.card.device.allocator.free(place.ptr)
        self._buffers.clear()
        rec = self._recorder
        if rec is not None and not rec.broken and all(quiet(d) for d in devices.values()):
            # run-time allocations freed with no event pending: a replay's mallocs and frees
            # (in its kernels' stores, in the same order) leave the allocator as this run did
            self.recorded = rec.tape(devices)

    def outputs(self, b: Bound, names: Sequence[str]) -> dict[str, Any]:
        """After ``finish``: the fetched arrays, and the values that stayed on the host."""
        return {n: b.fetched[n] if n in b.fetched else b.ctx.read(n) for n in names}

    def snapshots(self) -> dict[int, Any]:
        """What each card's trace needs, kept apart from the devices (their next run
        starts new simulators)."""
        return {i: SimpleNamespace(sim=c.device.sim, launches=list(c.device.launches), graph_mode=c.device.graph_mode)
                for i, c in self.cards.items()}


def _setter(view: np.ndarray) -> Callable[[Any], None]:
    return lambda data: view.__setitem__(..., data)


def _const(data: np.ndarray) -> Callable[[], np.ndarray]:
    return lambda: data


def _none() -> None:
    return None


def _drop(_: Any) -> None:
    return None


def _reader(b: Bound, name: str, made: list[DeviceTask]) -> Callable[[], Any]:
    """At the copy's start: the value's bytes now (their size times the transfer of the
    task in ``made``, for a value sized only at run time)."""
    def read() -> Any:
        value = b.ctx.read(name)
        if isinstance(value, np.ndarray):
            value = np.array(value)
            for task in made:
                task.bytes = task.driver.nbytes = float(value.nbytes)
        return value
    return read


def _keeper(box: dict[str, Any], name: str) -> Callable[[Any], None]:
    return lambda value: box.__setitem__(name, value)
