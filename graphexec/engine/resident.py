"""A device that outlives its plans: a session's signatures on one device, least recently
used first out.

Each input-shape signature compiles to its own plan; all of them load onto one device
(made with the first) and share one copy of the weights (``engine/weights.py``). Every
plan's io and activation pools are charged to that device's HBM. A bound on the number of
loaded plans (``Session(max_plans=N)``), or a load the device's memory cannot take, evicts
the least recently used plan (its pools freed, its weights too once no plan uses them);
when nothing is left to evict the error names the pools that hold the memory.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from typing import Any, Callable

from graphexec._limits import gc_paused
from graphexec.engine.compiled import Compiled
from graphexec.engine.loaded import load
from graphexec.engine.weights import WeightStore
from graphexec.errors import OutOfMemoryError
from graphexec.plan import CompileOptions, Plan
from graphexec.runtime.device import Device


class LoadedPlans:
    """The plans loaded on one device, by signature, in order of last use."""

    def __init__(self, profile: Any, options: CompileOptions, max_plans: int | None = None) -> None:
        self.profile, self.options, self.max_plans = profile, options, max_plans
        self._plans: OrderedDict[tuple[Any, ...], Compiled] = OrderedDict()
        self._device: Device | None = None
        self._weights: WeightStore | None = None
        self._keys: dict[int, tuple[Any, ...]] = {}   # id(plan) -> its key
        self.evicted = 0   # plans evicted so far

    def _home(self) -> tuple[Device, WeightStore]:
        """The device every plan loads onto and its weights, made on first use."""
        if self._device is None or self._weights is None:
            opts = self.options
            self._device = Device(self.profile, check_hazards=opts.check_hazards, graph_mode=opts.graph_mode)
            self._weights = WeightStore(self._device)
        return self._device, self._weights

    @property
    def device(self) -> Device:
        return self._home()[0]

    @property
    def weights(self) -> WeightStore:
        return self._home()[1]

    def get(self, key: tuple[Any, ...]) -> Compiled | None:
        """The plan loaded for ``key`` (now the most recently used), or None."""
        plan = self._plans.get(key)
        if plan is not None:
            self._plans.move_to_end(key)
        return plan

    def holds(self, plan: Compiled) -> bool:
        return any(p is plan for p in self._plans.values())

    def __len__(self) -> int:
        return len(self._plans)

    def load(self, key: tuple[Any, ...], make: Callable[[], Plan]) -> Compiled:
        """Compile (``make``) and load the plan of ``key``, evicting as the bound and the
        device's memory require; ``compile_s`` counts both, as it always has."""
        t0 = time.perf_counter()
        with gc_paused():   # passes and plan set-up make many small objects; collections would rescan them all
            loaded = self._fit(make())
        loaded.compile_s = time.perf_counter() - t0
        self._plans[key] = loaded
        self._keys[id(loaded)] = key
        while self.max_plans is not None and len(self._plans) > self.max_plans:   # after the load: weights stay
            self._evict()
        return loaded

    def use(self, plan: Compiled) -> None:
        """``plan`` runs now: it becomes the most recently used."""
        key = self._keys.get(id(plan))
        if key is not None and self._plans.get(key) is plan:
            self._plans.move_to_end(key)

    def _fit(self, plan: Plan) -> Compiled:
        while True:
            try:
                device, weights = self._home()
                return load(plan, device, weights=weights)
            except OutOfMemoryError as e:
                if not self._plans or "the plan needs" in str(e):   # alone it cannot fit either
                    raise OutOfMemoryError(f"{e}; {self.pools()}") from None
                self._evict()

    def _evict(self) -> None:
        _, plan = self._plans.popitem(last=False)
        del self._keys[id(plan)]
        plan.unload()
        self.evicted += 1

    def pools(self) -> str:
        """What holds the device's memory: each loaded plan's pools and the shared weights."""
        held = [f"plan {_shapes(p)}: activation pool {p.memory_plan.region_bytes['activation']} bytes, "
                f"inputs/outputs {p.memory_plan.region_bytes['io']}" for p in self._plans.values()]
        weights = self._weights.held_bytes if self._weights is not None else 0
        pools = sum(p.memory_plan.region_bytes["activation"] + p.memory_plan.region_bytes["io"]
                    for p in self._plans.values())
        other = (self._device.memory.used if self._device is not None else 0) - pools - weights
        return "held on the device: " + "; ".join([*held, f"weights (shared) {weights} bytes",
                                                    f"kept tensors and bodies' pools {max(other, 0)} bytes"])


def _shapes(plan: Compiled) -> str:
    types = plan.plan.options.input_types or {}
    return ", ".join(f"{k}{list(t.shape) if t.shape is not None else '[?]'}" for k, t in sorted(types.items())) \
        or "(declared shapes)"
