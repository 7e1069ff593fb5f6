"""The steps the torch-style profiler records: each card's launches between two ``prof.step()``.

A step is a window of host time on each card: the launches made in it are its tasks (a
task launched in step s belongs to s even when it runs later), so nothing is synchronized
until the steps are saved; then each card waits for its work and every step becomes a
``DeviceRun`` with its stats (``profiler.eager_stats``), laid on the card's own clock.
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
from graphexec.profiling.record import DeviceRun


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
    streams: dict[tuple[int, int], int] = field(default_factory=dict)   # (card, ptr) -> stream id

    def begin(self, step: int) -> None:
        if self.stack:
            for c in STATE.cards.values():
                self._wrap(c.device)
        self.open = [Window(i, c.device, step, len(c.device.launches), c.device.host_t)
                     for i, c in sorted(STATE.cards.items()) if c.alive]

    def end(self) -> None:
        """Close the open windows (a card opened during the step counts from its first launch)."""
        seen = {w.card for w in self.open}
        for i, c in sorted(STATE.cards.items()):
            if i not in seen and c.alive and c.device.launches:
                self.open.append(Window(i, c.device, self.open[0].step if self.open else 0, 0, 0.0))
        for w in self.open:
            w.last, w.end = len(w.device.launches), w.device.host_t
        self.closed += [w for w in self.open if w.last > w.first]
        self.open = []

    def hook(self, card: Card, ptr: int, nbytes: int) -> None:
        """One block taken (``nbytes`` > 0) or given back: the allocator's totals now."""
        alloc = card.allocator
        key = (card.index, ptr)
        stream = alloc.live[ptr].stream.id if nbytes > 0 else self.streams.pop(key, 0)
        if nbytes > 0:
            self.streams[key] = stream
        self.samples.append((card.index, float(card.device.host_t), alloc.counter("allocated_bytes")[0],
                             alloc.counter("reserved_bytes")[0], alloc.counter("active_bytes")[0], stream))

    def start(self) -> None:
        if self.memory:
            MEMORY_HOOKS.append(self.hook)

    def stop(self) -> None:
        if self.hook in MEMORY_HOOKS:
            MEMORY_HOOKS.remove(self.hook)
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

    def take(self) -> tuple[list[tuple[DeviceRun, Window]], list[tuple[int, float, int, int, int, int]]]:
        """Every closed window as a finished run (each card waits for its work first), and the
        memory samples inside them; both forgotten here."""
        for dev in {id(w.device): w.device for w in self.closed}.values():
            dev.synchronize_device()
        runs = [(_run(w), w) for w in self.closed]
        spans = [(w.card, w.start, max(w.end, *(t.end_t for t in r.tasks))) for r, w in runs if r.tasks]
        memory = [s for s in self.samples if any(c == s[0] and lo <= s[1] <= hi for c, lo, hi in spans)]
        self.closed, self.samples = [], []
        return runs, memory

    def forget_stacks(self) -> None:
        self.stacks = {}


PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))   # graphexec/


def call_stack(limit: int = 32) -> str:
    """The caller's frames, innermost first, as ``path(line): function`` lines (torch's form),
    graphexec's own frames left out."""
    frames = [f for f in traceback.extract_stack(limit=limit) if not f.filename.startswith(PACKAGE)]
    return "\n".join(f"{f.filename}({f.lineno}): {f.name}" for f in reversed(frames))


def _run(w: Window) -> DeviceRun:
    launches = w.device.launches[w.first:w.last]
    tasks = [lc.task for lc in launches if lc.task.end_t is not None]
    lo = w.start
    sim = SimpleNamespace(streams=w.device.sim.streams, finished=tasks,
                          samples=[s for s in w.device.sim.samples if s[0] >= lo])
    return DeviceRun(tasks, launches, sim, w.device.profile, w.device.id, False, "eager")
