"""The host's side of a device: the launches on its track, and the device's running clock.

The clock keeps running from run to run. ``Device.reset_run`` starts the next run's
simulator at zero and moves ``Device.clock_us`` (where that zero sits on the device's
own clock) on by the host time the finished run took, from its first host call to its
last: feeds, launches, synchronize, copies out, and whatever the host did on the device
before the next run (a new plan's weights). A run's own times (its stats and trace) stay
counted from its start, so they never depend on what ran before it; a profile of several
runs places each where it started on the clock (``profiling/steps.py``), and the device's
idle time while the host worked shows between them. Starting each run's simulator at
zero is exact, not an approximation: every run ends synchronized with the device idle,
and nothing the simulator decides depends on the absolute time.
"""

from __future__ import annotations

import itertools
from typing import Callable, NamedTuple

from graphexec.runtime.sim import DeviceTask

CLOCKS = itertools.count(1)   # each device's clock id (``RunRecord.clock`` tells clocks apart by it)


class HostLaunch(NamedTuple):
    """One host-side API call that enqueued a task, for the host track of the trace."""

    task: DeviceTask
    start: float
    end: float


# ``Device.graph_launch``: the simulator's submit, the launch list's append, the model execute's start and end
GraphLaunch = tuple[Callable[[DeviceTask, float], None], Callable[[HostLaunch], None], float, float]
