"""Several cards on one clock: compiled plans launched onto the devices of a server,
simulated together.

A single-device run (``Compiled.run``) starts its device's clock afresh and synchronizes
it alone. A multi-device run (:class:`CardsRun`) starts every card's clock once, then a
parallel mode (``engine/parallel.py``) launches onto it, in any order, without waiting:

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
from typing import Any, Callable, Mapping, Sequence

import numpy as np

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
    """One device of the run and its copy stream (made on its first copy, after the
    plans' streams, so those keep the ids their schedule gives them)."""

    index: int
    device: Device
    plans: list[Compiled] = field(default_factory=list)   # bound this run, in order
    _copy: Stream | None = None

    @property
    def copy_stream(self) -> Stream:
        if self._copy is None:
            try:
                self._copy = self.device.create_stream()
            except AclError:   # the plan took every stream the device has: copies share stream 0
                self._copy = self.device.default_stream
        return self._copy


@dataclass(eq=False)
class Bound:
    """A plan bound to a card for one launch: its context (its streams and events)."""

    card: Card
    plan: Compiled
    ctx: ExecContext
    fetched: dict[str, Any] = field(default_factory=dict)   # name -> host array, filled by ``fetch``'s copies


class CardsRun:
    """One run over ``cards`` (device ids) of ``server``, every clock started afresh."""

    def __init__(self, server: Server, cards: Sequence[int], timing: bool = False) -> None:
        self.server = server
        self.timing = timing
        self.cards: dict[int, Card] = {}
        for i in cards:
            dev = server.devices[i]
            dev.reset_run()
            self.cards[i] = Card(i, dev)
        server.group.now = 0.0   # every simulator is new: the group's clock starts with them
        self._bound: list[Bound] = []

    def bind(self, card: int, plan: Compiled) -> Bound:
        """``plan`` (loaded on ``card``'s device) with its streams and events made now."""
        c = self.cards[card]
        assert plan.device is c.device, "a plan runs on the device it was loaded on"
        c.plans.append(plan)
        return self._keep(Bound(c, plan, plan.bind()))

    def again(self, bound: Bound) -> Bound:
        """A fresh context for the same plan on the same streams and events (the next
        micro-batch: a wait binds to the record launched just before it)."""
        ctx = bound.plan.context()
        ctx.streams, ctx.events = bound.ctx.streams, bound.ctx.events
        return self._keep(Bound(bound.card, bound.plan, ctx))

    def _keep(self, b: Bound) -> Bound:
        b.ctx.inline = True
        self._bound.append(b)
        return b

    def feed(self, b: Bound, feeds: Mapping[str, Any]) -> Event:
        """Copy the arrays of ``feeds`` into the plan's input buffers, on the copy stream."""
        ctx, dev = b.ctx, b.card.device
        for name, value in feeds.items():
            loc = ctx.where.get(name)
            if loc is None or not isinstance(value, np.ndarray):
                ctx.host[name] = value
                continue
            view = dev.view(loc.ptr, loc.dtype, loc.shape)
            data = np.ascontiguousarray(value)
            self._host_copy(b.card, "h2d", name, data.nbytes, None if self.timing else _const(data),
                            None if self.timing else _setter(view), writes=[(loc.ptr, data.nbytes, name)])
        return self.record(b.card.device, b.card.copy_stream)

    def launch(self, b: Bound, after: Sequence[Event] = ()) -> list[Event]:
        """The plan's tasks, each of its streams first waiting on ``after``; the events
        recorded at the end of every one of its streams."""
        ctx, dev = b.ctx, b.card.device
        streams = list(ctx.streams.values())
        for s in streams:
            for ev in after:
                dev.stream_wait_event(s, ev)
        if self.timing:   # no math: control tasks as opaque kernels (``LaunchContext``)
            launch_all(LaunchContext(device=dev, stream_of=ctx.stream_of, streams=ctx.streams, events=ctx.events),
                       b.plan.schedule.order)
        else:
            launch_all(ctx, b.plan.schedule.order)
        return [self.record(dev, s) for s in streams]

    def fetch(self, b: Bound, names: Sequence[str], after: Sequence[Event] = ()) -> Event:
        """Copy ``names`` to the host once ``after`` ran (into ``b.fetched``); values
        that never live on the device (constants, host objects) are read at ``finish``."""
        dev, stream = b.card.device, b.card.copy_stream
        for ev in after:
            dev.stream_wait_event(stream, ev)
        for name in names:
            root, _ = b.plan.tasks.locate(name)
            if b.plan.graph.values[root].const is not None:
                continue
            t = b.plan.graph.values[name].type
            nbytes = t.nbytes if t.is_static else 0
            task = self._host_copy(b.card, "d2h", name, nbytes, None, None, reads=[])
            if not self.timing:
                task.start_fn, task.end_fn = _reader(b, name, task), _keeper(b.fetched, name)
        return self.record(dev, stream)

    def copy(self, src: Bound, src_name: str, dst: Bound, dst_name: str, pull: bool = True) -> DeviceTask:
        """A copy of ``src_name`` on ``src``'s card into the planned bytes of ``dst_name`` on
        ``dst``'s card, over the server's links, on the copy stream of the card that issues
        it: the destination (``pull``) or the source."""
        loc = dst.ctx.where[dst_name]
        view = dst.card.device.view(loc.ptr, loc.dtype, loc.shape)
        issuer = dst.card if pull else src.card
        nbytes = int(np.prod(loc.shape, dtype=np.int64)) * loc.dtype.itemsize
        start = _none if self.timing else (lambda: np.array(src.ctx.read(src_name)))
        task = self.server.copy_task(issuer.copy_stream, issuer.index, src.card.index, dst.card.index, nbytes, start,
                                     _drop if self.timing else _setter(view), [], [(loc.ptr, nbytes, dst_name)])
        issuer.device.launch(task)
        return task

    @staticmethod
    def record(dev: Device, stream: Stream) -> Event:
        ev = dev.create_event()
        dev.record_event(ev, stream)
        return ev

    def _host_copy(self, card: Card, kind: str, name: str, nbytes: int, start: Callable[[], Any] | None,
                   end: Callable[[Any], None] | None, reads: list | None = None, writes: list | None = None
                   ) -> DeviceTask:
        """A copy over ``card``'s host link (its own channel of the fabric)."""
        link = self.server.system.host_link(card.index)
        transfer = Transfer(self.server.fabric, [((link.resource,), link.latency_us)], float(nbytes), link.kind)
        src, dst = ("host", card.index) if kind == "h2d" else (card.index, "host")
        task = DeviceTask("memcpy", card.copy_stream, f"memcpy {kind} {name}", unit="copy", bytes=float(nbytes),
                          copy_kind=kind, start_fn=start, end_fn=end, reads=reads or [], writes=writes or [],
                          driver=transfer, meta={"link": link.kind, "src": src, "dst": dst})
        return card.device.launch(task)

    def finish(self) -> None:
        """Run every card to the end (one global time order), then free run-time allocations."""
        for card in self.cards.values():
            card.device.synchronize_device()
        for b in self._bound:
            for ptr in b.ctx.temp_segments:
                b.card.device.allocator.free(ptr)
            b.ctx.temp_segments.clear()

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


def _reader(b: Bound, name: str, task: DeviceTask) -> Callable[[], Any]:
    """At the copy's start: the value's bytes now (their size times the transfer, for a
    value sized only at run time)."""
    def read() -> Any:
        value = b.ctx.read(name)
        if isinstance(value, np.ndarray):
            value = np.array(value)
            task.bytes = task.driver.nbytes = float(value.nbytes)
        return value
    return read


def _keeper(box: dict[str, Any], name: str) -> Callable[[Any], None]:
    return lambda value: box.__setitem__(name, value)
