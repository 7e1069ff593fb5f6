"""Replay: a compiled graph's device timeline is simulated once, then replayed.

What the simulator decides (when each task starts and ends, on which cores) depends on
the task list, the costs and the host clock at launch, never on the numbers the kernels
compute. So a run first simulates (unless an earlier run of the plan already did, from
the same host time), recording only the order of kernel starts and ends, a ``Tape``;
then it calls the kernels' starts (read, compute) and ends (store) in that order, which
is exactly when the simulated device would have made them. The recorded finished tasks
serve for stats, trace and profile. Like a CUDA graph or GE's loaded model, the schedule
is fixed at load and the run only moves data; knowing the whole order in advance also
tells which kernels overlap in time (for ``threads``).

Runs with the hazard checker on always simulate (the checker watches the simulation).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from graphexec.engine.executor import ExecContext, KernelCall


@dataclass
class Tape:
    """One simulated run: the order of kernel starts and ends, and what the device kept.

    ``steps`` holds ``i`` for the start of kernel ``i`` (launch order) and ``~i`` for its end.
    """

    host_start: float          # the host clock when the first task was launched
    steps: list[int]
    sim: Any                   # the finished simulator of that run
    launches: list[Any]
    host_end: float            # the host clock after the device synchronized
    stats: Any = None          # the Stats of that run (all but host time carry over)

    @cached_property
    def starts(self) -> dict[int, int]:
        """Kernel index -> its start's position in ``steps``."""
        return {s: k for k, s in enumerate(self.steps) if s >= 0}

    @cached_property
    def alone(self) -> set[int]:
        """Kernels during which nothing else starts or ends: no other math to overlap with."""
        return {s for k, s in enumerate(self.steps[:-1]) if s >= 0 and self.steps[k + 1] == ~s}

    def fits(self, device: Any) -> bool:
        """Whether a run on ``device`` as it stands now would simulate exactly this tape."""
        return device.checker is None and device.host_t == self.host_start

    def restore(self, device: Any) -> None:
        """Leave ``device`` as the simulated run left it (a private copy of the simulator,
        whose finished tasks are shared: nothing changes them once finished)."""
        device.sim = shallow_copy(self.sim)
        device.launches = list(self.launches)
        device.host_t = self.host_end

    def stats_for(self, device: Any) -> Any:
        """The recorded run's stats with this run's host time: a copy of the frozen Stats with
        two fields set (``dataclasses.replace`` builds it anew through ``__init__``, a tenth of
        a decode step's fixed cost)."""
        stats = shallow_copy(self.stats)
        object.__setattr__(stats, "host_time_us", float(device.host_t))
        object.__setattr__(stats, "extra", {})
        return stats


def shallow_copy(obj: Any) -> Any:
    """``copy.copy(obj)``; an instance of a plain class (``_plain``) gets a new instance
    with its dict copied directly, which is what ``copy.copy`` does after its
    ``__reduce_ex__`` round trip (that took 2% of a timing-only run)."""
    if not _plain(type(obj)):
        return copy.copy(obj)
    new = object.__new__(type(obj))
    new.__dict__.update(obj.__dict__)
    return new


_PLAIN: dict[type, bool] = {}


def _plain(cls: Any) -> bool:
    """Whether ``copy.copy`` of a ``cls`` instance is a new instance with the same dict:
    object's own ``__new__`` and pickle protocol, no copy hooks, no slots in any base."""
    known = _PLAIN.get(cls)
    if known is None:
        hooks = ("__copy__", "__setstate__", "__getnewargs_ex__", "__getnewargs__")
        known = _PLAIN[cls] = bool(
            cls.__new__ is object.__new__ and cls.__reduce_ex__ is object.__reduce_ex__
            and cls.__reduce__ is object.__reduce__ and cls.__getstate__ is object.__getstate__
            and not any(hasattr(cls, hook) for hook in hooks) and all("__slots__" not in vars(k) for k in cls.__mro__))
    return known


def replay(ctx: ExecContext, tape: Tape, calls: list[KernelCall]) -> None:
    """Run the kernels' starts and ends in the order of the tape's steps, through their
    KernelCalls and the run's ``overlap`` (kernels computing on a thread pool; a run on one
    thread replays through ``engine/steps.py``)."""
    results: list[Any] = [None] * len(calls)
    for s in tape.steps:
        if s >= 0:
            results[s] = calls[s].begin()
        else:
            calls[~s].finish(results[~s])
            results[~s] = None
