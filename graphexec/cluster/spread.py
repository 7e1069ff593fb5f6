"""Graphs across cards: what a mode is built with and the shape of a mode.

``Session(graph, devices=N, parallel=P, microbatches=M, system=S)`` checks its options
(:func:`spread_of`, through ``cluster/modes.check_spread``), builds a :class:`Cluster`
(the graph, the compile options and a ``Server`` of the system's cards on one clock) and
hands every compile and run to the mode ``cluster/modes.py`` registers under ``P``. A
mode is a class built as ``Mode(cluster)``, with

    compile(feeds) -> Compiled   compile for the feeds' shapes (None: the declared ones)
                                 and load onto the cards; returns card 0's plan (what
                                 ``session.compiled`` and ``session.memory_plan`` show)
    run(feeds) -> Result         one run: ``cluster/cards.CardsRun`` launches the plans onto
                                 the cards and copies between them; outputs as one device
                                 gives them; stats a ``MultiStats`` (``cluster/stats.py``),
                                 trace one process per card (``MultiResult``)

and optionally ``estimate(feeds) -> float``, the makespan of a timing-only run
(``CardsRun(..., timing=True)``), which "auto" compares across the modes.
``cluster/data.py`` is the reference mode; ``split_batch`` and ``free_batch``
(``passes/free_batch.py``) serve any mode that splits the batch.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Mapping, Protocol

import numpy as np

from graphexec.engine.compiled import Compiled, clone_graph, compile, gc_paused
from graphexec.engine.loaded import load
from graphexec.engine.result import Result
from graphexec.engine.weights import WeightStore
from graphexec.errors import DeviceError, FeedError, GraphExecError
from graphexec.ir import Graph
from graphexec.plan import CompileOptions, Plan
from graphexec.runtime.device import Device
from graphexec.runtime.profiles import DeviceProfile
from graphexec.runtime.server import Server
from graphexec.runtime.systems import SystemProfile, builtin_systems, load_system

MODES = ("data", "pipeline", "tensor", "auto")


class Mode(Protocol):
    def compile(self, feeds: Mapping[str, Any] | None) -> Compiled: ...

    def run(self, feeds: dict[str, Any]) -> Result: ...


@dataclass(frozen=True)
class Spread:
    """Checked options of a multi-device session."""

    system: SystemProfile
    devices: int
    parallel: str
    microbatches: int


def spread_of(devices: Any, parallel: Any, microbatches: Any, system: Any, profile: DeviceProfile,
              device_given: bool) -> Spread | None:
    """Check the multi-device options; None for one device (today's single-device session).

    ``system`` defaults to the built-in whose cards are ``profile``'s; a device given
    explicitly with a system makes that system's cards of that device.
    """
    n = _positive(devices, "devices")
    m = _positive(microbatches, "microbatches")
    if n == 1:
        if system is not None:
            load_system(system)   # a bad name is still an error
        return None
    sys_ = system_for(system, profile, device_given)
    if n > sys_.count:
        raise DeviceError(f"devices={n}: system {sys_.name} has {sys_.count} devices")
    return Spread(sys_, n, parallel, m)


def _positive(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise GraphExecError(f"{what} must be an int >= 1, not {value!r}")
    return int(value)


def system_for(system: Any, profile: DeviceProfile, device_given: bool) -> SystemProfile:
    if system is not None:
        sys_ = load_system(system)
        if device_given and sys_.device_profile != profile:
            sys_ = sys_.model_copy(update={"device": profile})
        return sys_
    for name in builtin_systems():
        candidate = load_system(name)
        if candidate.device_profile.name == profile.name:
            if candidate.device_profile != profile:   # a profile of a built-in's name, from a file
                candidate = candidate.model_copy(update={"device": profile})
            return candidate
    raise DeviceError(f"no built-in system has {profile.name} cards (built-ins: {', '.join(builtin_systems())}); "
                      "name one with system= (its topology is used with these cards)")


@dataclass
class Cluster:
    """What a mode is built with: the session's graph and options, and the server."""

    graph: Graph
    options: CompileOptions
    spread: Spread
    server: Server = field(init=False)
    weights: dict[int, WeightStore] = field(init=False, default_factory=dict)   # card -> its one store

    def __post_init__(self) -> None:
        self.server = Server(self.spread.system, self.options.check_hazards)
        system = self.spread.system
        for a in range(self.devices):
            for b in range(self.devices):
                if a != b and system.peer_capable(a, b):
                    self.server.peers.add((a, b))   # as aclrtDeviceEnablePeerAccess between every capable pair

    @property
    def devices(self) -> int:
        return self.spread.devices

    @property
    def profile(self) -> DeviceProfile:
        return self.spread.system.device_profile

    def device(self, i: int) -> Device:
        """Card ``i`` of the server, made on first use (graph mode as the options say)."""
        dev = self.server.devices.get(i)
        if dev is None:
            dev = self.server.devices[i] = Device(self.profile, i, self.options.check_hazards,
                                                  graph_mode=self.options.graph_mode, group=self.server.group)
        return dev

    def load(self, plan: Plan, card: int, compile_s: float = 0.0) -> Compiled:
        """``plan`` loaded onto card ``card`` by the single-card executor (``engine/loaded.py``),
        its weights in the card's one store: the plans of every signature on a card hold one
        copy of each weight they share."""
        store = self.weights.get(card)
        if store is None:
            store = self.weights[card] = WeightStore(self.device(card))
        return load(plan, weights=store, compile_s=compile_s)

    def compile_onto(self, graph: Graph, options: CompileOptions, card: int) -> Compiled:
        """``graph`` (a copy) compiled for ``options`` and loaded onto card ``card``."""
        t0 = time.perf_counter()
        with gc_paused():
            plan = compile(clone_graph(graph), options, self.profile)
            return self.load(plan, card, time.perf_counter() - t0)


def split_batch(feeds: Mapping[str, Any], parts: int, what: str) -> tuple[list[str], list[dict[str, Any]]]:
    """The inputs that carry the batch and ``parts`` equal shares of the feeds.

    The batch is axis 0 of the first array input of rank >= 1; every array input whose
    axis 0 has that size is split, the others go whole into every share. ``what`` names
    the split in the error ("4 devices").
    """
    arrays = {k: v for k, v in feeds.items() if isinstance(v, np.ndarray) and v.ndim >= 1}
    if not arrays:
        raise FeedError(f"no input has a batch dim (axis 0) to split over {what}")
    first, x = next(iter(arrays.items()))
    batch = x.shape[0]
    if batch % parts:
        raise FeedError(f"input {first!r} has batch {batch} (axis 0), which {what} cannot split evenly")
    names = [k for k, v in arrays.items() if v.shape[0] == batch]
    step = batch // parts
    shares = [{k: v[i * step:(i + 1) * step] if k in names else v for k, v in feeds.items()} for i in range(parts)]
    return names, shares
