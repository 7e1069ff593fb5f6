"""A loaded graph's task list run by the compiled event loop (``_simcore.c``).

A graph-mode run of a compiled plan puts the simulator in one state every time: every
task enqueued at the model execute's end on streams that were idle, kernels, event
records and waits only. For that case the C loop runs the plain step
(``Simulator._step`` and ``CorePools``) over arrays, with the same float operations in
the same order, and the device is left as the Python loop leaves it: the same
DeviceTasks (seq, times, cores), finished order, launches, core log, clocks and tape
steps. Launch and simulation together are 3-14x faster than ``launch_all`` and the
Python loop (9.6x over the nine light models), which stay the reference and the path
for everything else (eager launches, copies, control flow, several devices, core
caps, the hazard checker) and for a build with no C compiler: ``run_graph`` then
returns None and the caller launches task by task.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from array import array
from itertools import repeat
from typing import Any, Mapping, Sequence

from graphexec import _switch
from graphexec.runtime.core_pools import INF
from graphexec.runtime.device import Device
from graphexec.runtime.host import HostLaunch
from graphexec.runtime.kernel_time import kernel_time
from graphexec.runtime.sim import Simulator
from graphexec.runtime.sim_task import DeviceTask
from graphexec.runtime.stream import Event, EventSnapshot, Stream

ABI = 2   # what ``_simcore.c`` takes and returns; a module built from another source is not used
_simcore = _switch.compiled("graphexec.runtime._simcore", ABI)   # None: the Python loop runs every graph

CORE = _simcore is not None   # False: every run goes through the Python loop


def enabled() -> bool:
    """Whether runs may take the compiled loop: it is built and the fast paths are on (``_switch``)."""
    return CORE and _switch.FAST
KERNEL, RECORD, WAIT = 0, 1, 2
# DeviceTask's slots in field order, and which of ``_device_tasks``' columns are lists (the rest: one value)
_MEMBERS = tuple(DeviceTask.__dict__[f.name] for f in dataclasses.fields(DeviceTask))
_ONE = {"copy_kind", "start_fn", "end_fn", "reads", "writes", "enqueue_t", "blocks_left", "blocks_running", "result",
        "driver"}
_COLUMN = tuple(f.name not in _ONE for f in dataclasses.fields(DeviceTask))
# per profile: the pools' names, each task's pool index, blocks' time and bytes (the C loop's columns),
# then each task's pool name, blocks' time and bytes as lists (the DeviceTasks' columns), and its block counts
Costs = tuple[tuple[str, ...], array, array, array, list[str], list[float], list[float], array]


class GraphTasks:
    """What the C loop and the DeviceTasks need of a plan's launch order, worked out once.

    ``entries`` per task in launch order: (kind, stream index, name, unit, block_dim,
    flops, bytes, dtype, meta, event index); a kernel's ``meta`` is its shared read-only
    meta, an event task's is its plan task (each run gets a fresh ``{"task": ...}``).
    """

    def __init__(self, entries: Sequence[tuple[int, int, str, str, int, Any, Any, str, Any, int]],
                 known: dict[int, Any] | None = None) -> None:
        self._setup([list(c) for c in zip(*entries)] if entries else [[] for _ in range(10)], known)

    @classmethod
    def from_columns(cls, cols: list[list[Any]], known: dict[int, Any] | None = None) -> GraphTasks:
        """The same from ``entries``' ten columns (``zip(*entries)``), for a caller that
        has them as columns already (an auto-search candidate: no tuple per task)."""
        made = cls.__new__(cls)
        made._setup(cols, known)
        return made

    def _setup(self, cols: list[list[Any]], known: dict[int, Any] | None) -> None:
        self.n = len(cols[0])
        self.known = known   # kernel times shared with other launch orders of the same tasks (``_costs``)
        self.kinds = bytes(cols[0])
        self.kind_names = [("kernel", "record", "wait")[k] for k in self.kinds]
        self.stream = array("i", cols[1])
        self.names, self.units, self.block_dims = cols[2], cols[3], cols[4]
        self.flops, self.bytes, self.dtypes, self.metas, self.event = cols[5], cols[6], cols[7], cols[8], cols[9]
        self.nblocks = array("q", (d if d > 1 else 1 for d in self.block_dims))
        self.kernel_pos = [i for i, k in enumerate(self.kinds) if k == KERNEL]
        self.event_pos = [i for i, k in enumerate(self.kinds) if k != KERNEL]
        self.kidx = array("i", repeat(-1, self.n))   # a kernel's index in the tape (kernels in launch order)
        for k, i in enumerate(self.kernel_pos):
            self.kidx[i] = k
        self.wait_rec, self.last_record, self.bound = self._bind()
        self.waits = [(i, self.wait_rec[i]) for i in self.event_pos if self.kinds[i] == WAIT]
        self.used_streams = sorted(set(self.stream))
        self._per_profile: dict[int, Any] = {}
        self._named: tuple[tuple[int, ...], list[str]] = ((), self.names)   # event ids -> names (``names_for``)

    def names_for(self, events: Mapping[int, Event]) -> list[str]:
        """Task names, an event task's with its device event's id (the same from run to run)."""
        ids = tuple(events[i].id for i in range(len(events)))
        if ids != self._named[0]:
            names = list(self.names)
            for i in self.event_pos:
                names[i] = f"{self.kind_names[i]} e{ids[self.event[i]]}"
            self._named = (ids, names)
        return self._named[1]

    def _bind(self) -> tuple[array, dict[int, int], bool]:
        """Each wait's record (the newest of its event launched before it), each event's
        newest record, and whether every wait has one (else the plain launch raises)."""
        newest: dict[int, int] = {}
        wait_rec = array("i", repeat(-1, self.n))
        bound = True
        for i in self.event_pos:
            if self.kinds[i] == RECORD:
                newest[self.event[i]] = i
            elif self.event[i] in newest:
                wait_rec[i] = newest[self.event[i]]
            else:
                bound = False
        return wait_rec, newest, bound

    def costs(self, sim: Any) -> Costs | None:
        """Per profile: the pools' names, each kernel's pool index, its blocks' time and
        bytes (``_queue_blocks``' sums), as columns; None where the C loop would differ
        from Python (NaN costs, a zero peak: Python raises)."""
        if type(sim) is not Simulator:   # a reference or test simulator runs its own loop
            return None
        key = id(sim.profile)
        known = self._per_profile.get(key)
        if known is not None and known[0] is sim.profile:
            return known[1]   # type: ignore[no-any-return]
        self._per_profile[key] = (sim.profile, made := self._costs(sim))
        return made

    def _costs(self, sim: Simulator) -> Costs | None:
        names = tuple(sim.cores.total)
        at = {name: i for i, name in enumerate(names)}
        pool, block_us, block_bytes = array("i", repeat(0, self.n)), [0.0] * self.n, [0.0] * self.n
        pools, nblocks = [""] * self.n, array("q", self.nblocks)
        for i in self.kernel_pos:
            unit, dtype = self.units[i], self.dtypes[i]
            name, peak = sim._kinds.get((unit, dtype)) or sim._kind(unit, dtype)
            if not peak or name not in at:
                return None
            pool[i], pools[i] = at[name], name
            nblocks[i], block_us[i], block_bytes[i] = self._time(sim.profile, i)
            if math.isnan(block_us[i]) or math.isnan(block_bytes[i]):
                return None
        return names, pool, array("d", block_us), array("d", block_bytes), pools, block_us, block_bytes, nblocks


    def _time(self, profile: Any, i: int) -> tuple[int, float, float]:
        """``kernel_time`` of task ``i``, from ``known`` where another launch order of the
        same plan tasks (an auto-search candidate) worked it out on the same profile: it
        depends on the task alone, not on its stream or place. The entry keeps the meta
        and profile it was made for, so an id is never taken for another object's."""
        meta, known = self.metas[i], self.known
        hit = known.get(id(meta)) if known is not None else None
        if hit is not None and hit[0] is meta and hit[1] is profile:
            return hit[2]   # type: ignore[no-any-return]
        res = kernel_time(profile, self.units[i], self.dtypes[i], self.flops[i], self.bytes[i],
                          self.block_dims[i], meta)
        if known is not None:
            known[id(meta)] = (meta, profile, res)
        return res


def idle_for_graph(dev: Device, streams: Sequence[Stream]) -> bool:
    """Whether a graph launch now would find what the C loop assumes: graph mode, no
    group, checker, held or on-device launches, live allocator, an idle simulator, and
    streams with no core cap."""
    if not (enabled() and dev.graph_mode and dev.group is None and dev.checker is None and not dev._held
            and not dev._on_device and (dev._allocator is None or not dev._allocator.live)):
        return False
    sim = dev._sim
    cores = sim.cores
    if type(sim) is not Simulator:   # a reference or test simulator runs its own loop
        return False
    if sim.queued or sim._timers or sim._ready or sim._active or sim._dirty or sim._blocked or cores.cohorts:
        return False
    return all(s.core_limit is None and not s.destroyed and s.active is None and not s.queue for s in streams)


def _run(dev: Device, streams: Sequence[Stream], tasks: GraphTasks) -> tuple[Any, Costs] | None:
    """The C loop's run of ``tasks`` launched now in graph mode (its output tuple, see
    ``_simcore.run``), changing nothing; None where it cannot run them or Python would
    fail (stalled, a division by zero: the Python loop then runs and fails as it does)."""
    if not tasks.n or not tasks.bound or not idle_for_graph(dev, streams):
        return None
    sim = dev._sim
    costs = tasks.costs(sim)
    if costs is None:
        return None
    names, pool, bu, bb = costs[:4]
    nblocks = costs[7]
    cores = sim.cores
    prio = array("q", (s.priority for s in streams))
    order = sorted(range(len(streams)), key=lambda i: (streams[i].priority, streams[i].id))
    rank = array("i", repeat(0, len(streams)))
    for r, i in enumerate(order):
        rank[i] = r
    end = dev._model_execute(stamp=False)[1]
    seq0 = next(sim._seq)
    try:
        out = _simcore.run(tasks.kinds, tasks.stream, pool, nblocks, bu, bb, tasks.wait_rec, tasks.kidx,
                           prio, rank, array("q", (cores.free[p] for p in names)), names, cores.bw,
                           sim._overhead, end, sim.now, cores.t, seq0)
    finally:   # as it was (a Ctrl-C too): the Python loop draws them again if it runs
        sim._seq = itertools.count(seq0)
    return None if out[0] else (out, costs)


def graph_times(dev: Device, streams: Sequence[Stream], tasks: GraphTasks) -> dict[int, tuple[float, float]] | None:
    """Each kernel's (start, end) by launch index, in the order they finished, of ``tasks``
    launched now in graph mode, the device left as it was (a what-if simulation needs the
    times alone); None where the C loop cannot run them."""
    ran = _run(dev, streams, tasks)
    if ran is None:
        return None
    starts, ends, kinds = ran[0][2], ran[0][4], tasks.kinds
    return {i: (starts[i], ends[i]) for i in ran[0][6] if kinds[i] == KERNEL}


def run_graph(dev: Device, streams: Sequence[Stream], events: Mapping[int, Event],
              tasks: GraphTasks) -> list[int] | None:
    """Launch ``tasks`` in graph mode and synchronize the device, as ``launch_all`` then
    ``synchronize_device`` would; the tape's steps (kernel ``i``'s start, ``~i`` its end).
    None, with nothing changed, where the C loop cannot run it (the caller launches)."""
    ran = _run(dev, streams, tasks)
    if ran is None:
        return None
    out, (_, _, _, _, pools, block_us, block_bytes, _) = ran
    start, end = dev._model_execute()
    sim, cores = dev._sim, dev._sim.cores
    _, seq, starts, readies, ends, maxc, finished, steps, log, last_end, now, cores_t, next_seq = out
    made = _device_tasks(tasks, streams, events, end, seq, starts, ends, readies, maxc, pools, block_us,
                         block_bytes)
    sim.finished += map(made.__getitem__, finished)
    sim.now, sim._seq = now, itertools.count(next_seq)
    cores.log += log
    cores.t, cores.next_t, cores.stale = cores_t, INF, False
    for i in tasks.used_streams:
        streams[i].last_end = last_end[i]
    for ev, i in tasks.last_record.items():
        events[ev].record_task = made[i]
    dev._launches += _simcore.tuples(HostLaunch, (made, start, end), (True, False, False), tasks.n)
    woken = sim.now + (dev.profile.sync_return_us or 0.0)   # ``synchronize_device``, the host waking
    if woken > dev._host_t:
        dev._host_t = woken
    return steps


def _device_tasks(tasks: GraphTasks, streams: Sequence[Stream], events: Mapping[int, Event], enqueue: float,
                  seq: list[int], starts: list[float], ends: list[float], readies: list[float], maxc: list[int],
                  pools: list[str], block_us: list[float], block_bytes: list[float]) -> list[DeviceTask]:
    """The run's DeviceTasks in launch order, each made with its final fields by the C
    module from columns (what ``DeviceTask(...)`` with the same values makes, without a
    Python frame per task); an event task gets its own meta dict, a wait its snapshot."""
    metas: list[Any] = list(tasks.metas)
    evs: list[Any] = [None] * tasks.n
    for i in tasks.event_pos:
        metas[i] = {"task": metas[i]}
        if tasks.kinds[i] == RECORD:
            evs[i] = events[tasks.event[i]]
    columns = (tasks.kind_names, list(map(streams.__getitem__, tasks.stream)), tasks.names_for(events), tasks.units,
               tasks.block_dims, tasks.flops, tasks.bytes, tasks.dtypes, "d2d", evs, None, None, metas, (), (), seq,
               enqueue, starts, ends, 0, 0, block_us, block_bytes, readies, None, maxc, None, pools)
    made: list[DeviceTask] = _simcore.instances(DeviceTask, _MEMBERS, columns, _COLUMN, tasks.n)
    for i, rec in tasks.waits:
        made[i].event = EventSnapshot(made[rec])
    return made
