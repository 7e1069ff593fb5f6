"""The steps the torch-style profiler records: each device's launches between two ``prof.step()``.

A step is a window of host time on each device (an eager card, or an ACL device): the
launches made in it are its tasks (a task launched in step s belongs to s even when it
runs later), so nothing is synchronized until the steps are saved; then each device waits
for its work and every step becomes a ``DeviceRun`` with its stats
(``profiler.eager_stats``), laid on the device's own clock. An ACL device reset inside a
step closes its window there (``acl.state.TEARDOWN_HOOKS``). A Session run whose result is
made inside a step (``record.RESULT_OBSERVERS``) belongs to that step: every card of it,
with the stats and diagnosis the run made itself.
With ``profile_memory`` the caching allocator's totals are sampled after every block taken
or given back (``_tensor.MEMORY_HOOKS``); with ``with_stack`` each card's ``launch`` is
wrapped while the profiler runs, keeping the caller's Python frames (graphexec's own left
out, innermost first) for each task it launches.
"""

from __future__ import annotations

import os
import traceback
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from graphexec.npu._state import STATE, Card
from graphexec.npu._tensor import MEMORY_HOOKS
from graphexec.profiling.record import RESULT_OBSERVERS, DeviceRun


@dataclass
class Window:
    """One card's part of one step: its launches [first, last) and the host's (start, end)."""

    card: int
    device: Any
    step: int
    first: int
    start: float
    last: int = -1
    end: float = 0.0
    kind: str = "eager"   # or "acl"


@dataclass
class Recorder:
    """The open windows of the current step and the closed ones not yet saved."""

    memory: bool = False
    stack: bool = False
    stacks: dict[int, tuple[Any, str]] = field(default_factory=dict)   # id(task) -> (task, its call stack)
    wrapped: list[Any] = field(default_factory=list)                   # devices whose launch is wrapped
    open: list[Window] = field(default_factory=list)
    closed: list[Window] = field(default_factory=list)
    samples: list[tuple[int, float, int, int, int, int]] = field(default_factory=list)
    blocks: list[tuple[int, int, int, int]] = field(default_factory=list)   # each sample's (card, ptr, bytes, launches)
    streams: dict[tuple[int, int], int] = field(default_factory=dict)   # (card, ptr) -> stream id
    step: int | None = None                                             # the step being recorded
    results: list[tuple[Any, int]] = field(default_factory=list)        # (Session result, its step)
    gone: set[int] = field(default_factory=set)                         # ids of ACL devices reset

    def begin(self, step: int) -> None:
        if self.stack:
            for _, _, dev in devices():
                self._wrap(dev)
        self.step = step
        self.open = [Window(i, dev, step, len(dev.launches), dev.host_t, kind=kind) for kind, i, dev in devices()]

    def end(self) -> None:
        """Close the open windows (a device opened during the step counts from its first launch)."""
        seen = {id(w.device) for w in self.open}
        step = self.step if self.step is not None else 0
        for kind, i, dev in devices():
            if id(dev) not in seen and dev.launches:
                self.open.append(Window(i, dev, step, 0, 0.0, kind=kind))
        for w in self.open:
            w.last, w.end = len(w.device.launches), w.device.host_t
        self.closed += [w for w in self.open if w.last > w.first]
        self.open, self.step = [], None

    def on_result(self, result: Any) -> None:
        """A Session run finished: it belongs to the step being recorded, if any."""
        if self.step is not None and result.run is not None:
            self.results.append((result, self.step))

    def on_teardown(self, dev: Any) -> None:
        """An ACL device is reset: its window ends now (it has waited for its work)."""
        for w in [w for w in self.open if w.device is dev]:
            w.last, w.end = len(dev.launches), dev.host_t
            self.open.remove(w)
            if w.last > w.first:
                self.closed.append(w)
        self.gone.add(id(dev))

    def hook(self, card: Card, ptr: int, nbytes: int) -> None:
        """One block taken (``nbytes`` > 0) or given back: the allocator's totals now."""
        alloc = card.allocator
        key = (card.index, ptr)
        stream = alloc.live[ptr].stream.id if nbytes > 0 else self.streams.pop(key, 0)
        if nbytes > 0:
            self.streams[key] = stream
        self.samples.append((card.index, float(card.device.host_t), alloc.counter("allocated_bytes")[0],
                             alloc.counter("reserved_bytes")[0], alloc.counter("active_bytes")[0], stream))
        size = alloc.live[ptr].size if nbytes > 0 else -1
        self.blocks.append((card.index, ptr, size, len(card.device.launches)))

    def start(self) -> None:
        from graphexec.acl import state as acl_state

        if self.memory:
            MEMORY_HOOKS.append(self.hook)
        RESULT_OBSERVERS.append(self.on_result)
        acl_state.TEARDOWN_HOOKS.append(self.on_teardown)

    def stop(self) -> None:
        from graphexec.acl import state as acl_state

        if self.hook in MEMORY_HOOKS:
            MEMORY_HOOKS.remove(self.hook)
        if self.on_result in RESULT_OBSERVERS:
            RESULT_OBSERVERS.remove(self.on_result)
        if self.on_teardown in acl_state.TEARDOWN_HOOKS:
            acl_state.TEARDOWN_HOOKS.remove(self.on_teardown)
        for dev in self.wrapped:
            del dev.launch   # the class's method again
        self.wrapped = []

    def _wrap(self, dev: Any) -> None:
        if any(d is dev for d in self.wrapped):
            return
        launch, stacks = dev.launch, self.stacks

        def traced(task: Any) -> Any:
            stacks[id(task)] = (task, call_stack())
            return launch(task)

        dev.launch = traced
        self.wrapped.append(dev)

    def stack_of(self, task: Any) -> str:
        kept = self.stacks.get(id(task))
        return kept[1] if kept is not None and kept[0] is task else ""

    def take(self) -> Taken:
        """Every closed window as a finished run (each device waits for its work first), the
        memory samples inside them (and the block each sample took or gave back), and the
        Session results of the steps; all forgotten here."""
        for dev in {id(w.device): w.device for w in self.closed if id(w.device) not in self.gone}.values():
            dev.synchronize_device()
        runs = [(_run(w), w) for w in self.closed]
        spans = [(w.card, w.start, max(w.end, *(t.end_t for t in r.tasks)))
                 for r, w in runs if r.tasks and w.kind == "eager"]
        keep = [k for k, s in enumerate(self.samples) if any(c == s[0] and lo <= s[1] <= hi for c, lo, hi in spans)]
        memory, blocks = [self.samples[k] for k in keep], [self.blocks[k] for k in keep]
        results = self.results
        self.closed, self.samples, self.blocks, self.results, self.gone = [], [], [], [], set()
        return Taken(runs, memory, blocks, results)

    def forget_stacks(self) -> None:
        self.stacks = {}


PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))   # graphexec/


def call_stack(limit: int = 32) -> str:
    """The caller's frames, innermost first, as ``path(line): function`` lines (torch's form),
    graphexec's own frames left out."""
    frames = [f for f in traceback.extract_stack(limit=limit) if not f.filename.startswith(PACKAGE)]
    return "\n".join(f"{f.filename}({f.lineno}): {f.name}" for f in reversed(frames))


@dataclass
class Taken:
    """What the steps saved at once recorded: each device window's run, the allocator's
    samples and their blocks (``Recorder.blocks``), and the Session results."""

    runs: list[tuple[DeviceRun, Window]]
    memory: list[tuple[int, float, int, int, int, int]]
    blocks: list[tuple[int, int, int, int]]
    results: list[tuple[Any, int]]


def devices() -> list[tuple[str, int, Any]]:
    """Every device work is launched on: the eager cards, then ACL's open devices."""
    from graphexec.acl.state import STATE as ACL

    out = [("eager", i, c.device) for i, c in sorted(STATE.cards.items()) if c.alive]
    mine = {id(d) for _, _, d in out}
    return out + [("acl", i, e.device) for i, e in sorted(ACL.devices.items()) if id(e.device) not in mine]


def _run(w: Window) -> DeviceRun:
    launches = w.device.launches[w.first:w.last]
    tasks = [lc.task for lc in launches if lc.task.end_t is not None]
    lo = w.start
    sim = SimpleNamespace(streams=w.device.sim.streams, finished=tasks,
                          samples=[s for s in w.device.sim.samples if s[0] >= lo])
    return DeviceRun(tasks, launches, sim, w.device.profile, w.device.id, False, w.kind)
