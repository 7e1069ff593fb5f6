"""A multi-card run's timeline, simulated once per signature and replayed.

What the server's simulation decides (when each task of every card starts and ends) does
not depend on the numbers the kernels compute, for plans whose timeline no value decides
(``Compiled.needs_values``). So, as one device does (``engine/replay.py``), a run that
may record (``CardsRun(record=True)``) numbers every task it gives a start or an end, in
the order it makes them (host copies, on-card and peer copies, each plan's kernels in
launch order, fetches), and logs every start ``k`` and end ``~k`` as the simulator calls
them, across all cards, into one list: a :class:`CardsTape`, with each card's finished
simulator. A later run of the same launches (``CardsRun(tape=...)``) makes the same
tasks' starts and ends, launches nothing, calls them in the tape's order (kernels through
the plans' replay steps, ``Steps.inline``) and leaves every card as the simulated run
left it: outputs, stats and traces are the simulated run's.

A run records only where nothing else decides its timeline: no hazard checker, no plan
whose timeline values decide, every kernel through replay steps, no buffer of the run's
own (a pipeline's slot buffers: the caching allocator learns their streams from the
launches, and their frees wait on events), and the caching allocator of every card with
no block live or waiting on an event when the run starts and once it freed its run-time
allocations (a replay makes the same mallocs and frees in its kernels' stores).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from graphexec import _switch
from graphexec.engine.replay import shallow_copy
from graphexec.runtime.device import Device

REPLAY = True   # False: every multi-card run simulates (the plain path; tapes still recorded)

Start = Callable[[], Any]
End = Callable[[Any], None]


def quiet(dev: Device) -> bool:
    """Whether nothing but the launches decides ``dev``'s timeline: no hazard checker, no
    block of the caching allocator live or waiting on an event."""
    alloc = dev.allocator
    return dev.checker is None and not alloc.live and not alloc.pending


@dataclass
class CardsTape:
    """One simulated run over several cards: the order of its tasks' starts and ends, and
    what each card kept (its simulator, launches and host clock) and the server's clock."""

    cards: tuple[int, ...]
    tasks: int                              # how many tasks got a start or an end
    steps: list[int]                        # ``k`` at task k's start, ``~k`` at its end
    kept: dict[int, tuple[Any, list[Any], float]]
    now: float

    def fits(self, devices: dict[int, Device]) -> bool:
        """Whether a run on ``devices`` (just reset) would simulate this tape again (never with
        the fast paths off: ``_switch``)."""
        return REPLAY and _switch.FAST and tuple(devices) == self.cards and all(quiet(d) for d in devices.values())

    def replay(self, fns: list[tuple[Start | None, End | None]]) -> None:
        """Call the tasks' starts and ends (``fns``, numbered as when recorded) in order."""
        assert len(fns) == self.tasks, "a replayed run makes the tasks its tape recorded"
        results: list[Any] = [None] * len(fns)
        for s in self.steps:
            if s >= 0:
                start = fns[s][0]
                results[s] = None if start is None else start()
            else:
                end = fns[~s][1]
                if end is not None:
                    end(results[~s])
                results[~s] = None

    def restore(self, devices: dict[int, Device]) -> None:
        """Leave every card as the simulated run left it (a private copy of its simulator in
        the place of the one its reset made, in the server's group)."""
        for i, dev in devices.items():
            sim, launches, host_t = self.kept[i]
            fresh, mine = dev.sim, shallow_copy(sim)
            group = dev.group
            if group is not None:
                group.sims[group.sims.index(fresh)] = mine
            dev.sim, dev.launches, dev.host_t = mine, list(launches), host_t
            if group is not None:
                group.now = self.now


class Recorder:
    """The tape a recording run logs: its tasks' starts and ends wrapped to log their number."""

    def __init__(self) -> None:
        self.steps: list[int] = []
        self.tasks = 0
        self.broken = ""   # why this run cannot be replayed (empty: it can)

    def wrap(self, start: Start | None, end: End | None) -> tuple[Start, End]:
        """Task number ``self.tasks``'s start and end, logging it."""
        k, steps = self.tasks, self.steps
        self.tasks += 1

        def logged_start() -> Any:
            steps.append(k)
            return None if start is None else start()

        def logged_end(result: Any) -> None:
            steps.append(~k)
            if end is not None:
                end(result)
        return logged_start, logged_end

    def kernels(self, starts: list[Start], end: End) -> tuple[list[Start], End]:
        """A plan's kernel starts (``Steps.inline``'s, kernel ``i`` the number ``base + i``)
        and their one end (given ``(i, ...)``), logging."""
        base, steps = self.tasks, self.steps
        self.tasks += len(starts)

        def logged(k: int, start: Start) -> Start:
            def logged_start() -> Any:
                steps.append(k)
                return start()
            return logged_start

        def logged_end(token: Any) -> None:
            steps.append(~(base + token[0]))
            end(token)
        return [logged(base + i, s) for i, s in enumerate(starts)], logged_end

    def tape(self, devices: dict[int, Device]) -> CardsTape:
        """The tape of the run just synchronized on ``devices``."""
        kept = {i: (d.sim, list(d.launches), float(d.host_t)) for i, d in devices.items()}
        group = next(iter(devices.values())).group
        return CardsTape(tuple(devices), self.tasks, self.steps, kept, 0.0 if group is None else group.now)
