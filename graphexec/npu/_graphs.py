"""Graphs in eager code: ``Module`` runs a compiled plan, ``NPUGraph`` replays captured ops.

``Module(graph)`` compiles the graph (graph mode's passes: streams, events, memory plan)
onto the card of its inputs, once per input signature and stream; a call copies the
inputs into the plan's buffers, launches every task as one loaded graph (one launch
cost, ``Device.model_execute``) with the plan's stream 0 on the current stream, and
copies the outputs into new tensors, all in stream order, without waiting.

``with npu.graph(g): y = f(x)`` records every launch ``f`` makes instead of running it
(torch's capture: ``y`` holds its values only after a replay); the graph keeps the
tensors it touched alive, so their bytes stay theirs. ``g.replay()`` relaunches the
recorded work as one graph: the launch cost is paid once, not per op.
"""

from __future__ import annotations

from contextlib import ExitStack, contextmanager
from dataclasses import replace
from typing import Any, Callable, Iterator

import numpy as np

from graphexec.engine.compiled import Compiled, clone_graph, compile_graph
from graphexec.engine.feeds import check_feeds, signature
from graphexec.errors import GraphExecError
from graphexec.frontend import load
from graphexec.ir import Graph
from graphexec.npu import _launch
from graphexec.npu._copy import empty_on, span
from graphexec.npu._state import STATE, Card
from graphexec.npu._streams import Stream, set_stream
from graphexec.npu._tensor import Tensor
from graphexec.plan import CompileOptions
from graphexec.runtime.launch import launch_all
from graphexec.runtime.stream import Stream as RtStream


class Module:
    """A graph (or anything ``gx.load`` reads) callable on device tensors, in graph order."""

    def __init__(self, graph: Graph | Any, streams: int = 1) -> None:
        self.graph = graph if isinstance(graph, Graph) else load(graph)
        self.options = CompileOptions(streams=streams)
        self._plans: dict[Any, tuple[Card, Compiled, dict[int, RtStream], dict[int, Any]]] = {}

    def __call__(self, *args: Tensor) -> Any:
        names = self.graph.inputs
        if len(args) != len(names) or not all(isinstance(a, Tensor) and a.is_npu for a in args):
            raise GraphExecError(f"{self.graph.name}: takes {len(names)} device tensor(s) ({', '.join(names)}), "
                                 f"got {len(args)} argument(s)")
        cards = {a.card() for a in args}
        if len(cards) != 1:
            raise GraphExecError(f"{self.graph.name}: inputs on {sorted(c.name for c in cards)}; move them to one")
        card = cards.pop()
        compiled, streams, events = self._plan(card, dict(zip(names, args)))
        outs = [_output(card, compiled, n) for n in self.graph.outputs]
        _launch.submit(card, lambda: self._launch(card, compiled, streams, events, args, outs))
        if STATE.capture is not None:
            for t in (*args, *outs):
                STATE.capture.keep(t._store)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _plan(self, card: Card, feeds: dict[str, Tensor]) -> tuple[Compiled, dict[int, RtStream], dict[int, Any]]:
        types = check_feeds(self.graph, {k: np.empty(v.shape, v.dtype) for k, v in feeds.items()})
        key = (card.index, card.current.id, signature(types))
        entry = self._plans.get(key)
        if entry is None or entry[0] is not card:   # a card made anew (npu.init, reset_device): plan again
            compiled = compile_graph(clone_graph(self.graph), replace(self.options, input_types=types),
                                     card.device.profile, card.device)
            dev = card.device
            streams = {0: card.current, **{i: dev.create_stream() for i in range(1, len(compiled.schedule.streams))}}
            events = {i: dev.create_event() for i in range(compiled.schedule.num_event_ids + 2 * len(streams))}
            entry = self._plans[key] = (card, compiled, streams, events)
        return entry[1], entry[2], entry[3]

    def _launch(self, card: Card, compiled: Compiled, streams: dict[int, RtStream], events: dict[int, Any],
                args: tuple[Tensor, ...], outs: list[Tensor]) -> None:
        dev = card.device
        ctx = compiled.context()
        ctx.inline, ctx.streams, ctx.events = True, streams, events
        checked = dev.checker is not None
        with dev.model_execute():
            for name, t in zip(self.graph.inputs, args):
                _copy_task(dev, streams[0], t._arr, ctx.read(name), [span(t)] if checked else ())
            spare = len(events) - 2 * len(streams)
            _fan(dev, streams, [events[spare + i] for i in range(len(streams))], out=True)
            launch_all(ctx, compiled.schedule.order)
            _fan(dev, streams, [events[spare + len(streams) + i] for i in range(len(streams))], out=False)
            for name, o in zip(self.graph.outputs, outs):
                _copy_task(dev, streams[0], ctx.read(name), o._arr, (), [span(o)] if checked else ())


def _fan(dev: Any, streams: dict[int, RtStream], events: list[Any], out: bool) -> None:
    """Order the plan's other streams after stream 0 (``out``) or stream 0 after them."""
    for i, s in streams.items():
        if i == 0:
            continue
        src, dst = (streams[0], s) if out else (s, streams[0])
        dev.record_event(events[i], src)
        dev.stream_wait_event(dst, events[i])


def _copy_task(dev: Any, stream: RtStream, src: np.ndarray, dst: np.ndarray, reads: Any = (),
               writes: Any = ()) -> None:
    from graphexec.runtime.sim import DeviceTask

    dev.launch(DeviceTask("memcpy", stream, "memcpy d2d", unit="copy", bytes=float(src.nbytes), copy_kind="d2d",
                          start_fn=src.copy, end_fn=lambda d: dst.__setitem__(..., d), reads=reads, writes=writes))


def _output(card: Card, compiled: Compiled, name: str) -> Tensor:
    t = compiled.graph.values[name].type
    if not t.is_static or t.dtype is None or t.shape is None:
        raise GraphExecError(f"{compiled.graph.name}: output {name!r} has a shape known only when it runs ({t}); "
                             "eager mode needs it from the input shapes")
    return empty_on(card, t.dtype, tuple(int(d) for d in t.shape if isinstance(d, int)))


class NPUGraph:
    """Captured launches, replayed as one graph (torch.npu.NPUGraph)."""

    def __init__(self) -> None:
        self._launches: list[tuple[Card, Callable[[], Any]]] = []
        self._keep: dict[int, Any] = {}
        self.captured = False

    def record(self, card: Card, launch: Callable[[], Any]) -> None:
        self._launches.append((card, launch))

    def keep(self, store: Any) -> None:
        if store is not None:
            self._keep[id(store)] = store

    def capture_begin(self) -> None:
        if STATE.capture is not None:
            raise GraphExecError("a graph is already being captured; captures do not nest")
        self.reset()
        STATE.capture = self

    def capture_end(self) -> None:
        if STATE.capture is not self:
            raise GraphExecError("capture_end without capture_begin on this graph")
        STATE.capture, self.captured = None, True

    def replay(self) -> None:
        """Relaunch the captured work, each card's as one loaded graph, in the order it was
        captured (a card's wait may be on another card's record: a peer copy)."""
        if not self.captured:
            raise GraphExecError("replay of an NPUGraph that was never captured")
        cards = list(dict.fromkeys(c for c, _ in self._launches))
        for card in cards:
            card.check()
        with ExitStack() as stack:
            for card in cards:
                stack.enter_context(card.device.model_execute())
            for _, launch in self._launches:
                launch()

    def reset(self) -> None:
        self._launches, self._keep, self.captured = [], {}, False

    @property
    def num_launches(self) -> int:
        return len(self._launches)


@contextmanager
def graph(npu_graph: NPUGraph, pool: Any = None, stream: Stream | None = None) -> Iterator[NPUGraph]:
    """``with npu.graph(g):`` capture the launches made meanwhile into ``g`` (on ``stream`` if given)."""
    if not isinstance(npu_graph, NPUGraph):
        raise GraphExecError(f"npu.graph needs an NPUGraph, got {type(npu_graph).__name__}")
    before = None
    if stream is not None:
        before = stream.card.current
        set_stream(stream)
    npu_graph.capture_begin()
    try:
        yield npu_graph
    finally:
        npu_graph.capture_end()
        if stream is not None and before is not None:
            stream.card.current = before
