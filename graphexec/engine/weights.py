"""One copy of each weight on a device, whatever the number of plans loaded there.

A session compiles one plan per input-shape signature; the plans of one model share
their initializers (``clone_graph`` shares constants), so on a device that outlives its
plans each constant is uploaded once, by the first plan that needs it, and every later
plan points at that copy. A region of weights is freed when no loaded plan uses it.

The first plan's weights are laid out exactly as its memory plan says (one region, its
offsets, one upload per weight in plan order): a plan alone on its device is placed as
it always was. A later plan's constants not yet on the device get a region of their own,
packed in plan order at the plan's alignment.

A constant folded at compile time (a transposed weight, a BatchNorm folded into a Conv,
a shape) is a new array in every plan, the same bytes under the same name: it is found by
name and compared byte for byte, so it too is held once, not once per signature.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from graphexec.ir import Graph
from graphexec.plan import MemoryPlan, PlanEntry, align


def _nothing() -> None:
    return None


@dataclass(eq=False)
class WeightRegion:
    """Device bytes holding some plans' weights; freed when no loaded plan uses them."""

    base: int
    nbytes: int
    users: int = 0
    keys: list[tuple[str, int]] = field(default_factory=list)


class WeightStore:
    """The weights on one device, keyed by tensor name and constant (the array itself)."""

    def __init__(self, device: Any) -> None:
        self.device = device
        self._at: dict[tuple[str, int], tuple[np.ndarray, int, WeightRegion]] = {}
        self._named: dict[str, list[tuple[str, int]]] = {}   # tensor name -> its keys in ``_at``
        self._unwritten: list[tuple[np.ndarray, np.ndarray, WeightRegion]] = []   # views, the bytes they wait for
        self.uploads = 0          # weights copied to the device so far (each once while held)
        self.uploaded_bytes = 0

    @property
    def held_bytes(self) -> int:
        """Device bytes of the weight regions still held."""
        return sum(r.nbytes for r in {id(r): r for _, _, r in self._at.values()}.values())

    def place(self, graph: Graph, memory_plan: MemoryPlan) -> tuple[dict[str, int], list[WeightRegion]]:
        """Each planned weight's device address, uploading (on the device clock now) those
        not yet on the device; and the regions the plan now uses (``release`` them)."""
        entries = [(e, _const(graph, e)) for e in memory_plan.buffers if e.region == "weight"]
        new = [(e, c) for e, c in entries if (e.tensor, id(c)) not in self._at and not self._same_bytes(e.tensor, c)]
        if new or not entries:
            self._upload(new, memory_plan.region_bytes["weight"] if len(new) == len(entries) else None)
        used = {id(self._at[(e.tensor, id(c))][2]): self._at[(e.tensor, id(c))][2] for e, c in entries}
        for region in used.values():
            region.users += 1
        return {e.tensor: self._at[(e.tensor, id(c))][1] for e, c in entries}, list(used.values())

    def _same_bytes(self, name: str, const: np.ndarray) -> bool:
        """Whether a constant of ``name`` with ``const``'s bytes is on the device already (a
        folded weight another plan made); if so ``const`` is keyed to that copy."""
        for key in self._named.get(name, ()):
            held, addr, region = self._at[key]
            if held.dtype == const.dtype and held.shape == const.shape and _bytes(held) == _bytes(const):
                self._key((name, id(const)), const, addr, region)   # kept alive with its key: its id stays its own
                return True
        return False

    def _key(self, key: tuple[str, int], const: np.ndarray, addr: int, region: WeightRegion) -> None:
        self._at[key] = (const, addr, region)
        self._named.setdefault(key[0], []).append(key)
        region.keys.append(key)

    def _upload(self, new: list[tuple[PlanEntry, np.ndarray]], planned: int | None) -> None:
        """A region for ``new`` (at the plan's offsets when ``planned``, its weight bytes),
        and each weight's copy onto the device; the bytes move at the first computing run."""
        if planned is not None:
            offsets, size = [e.offset for e, _ in new], planned
        else:
            offsets, size = [], 0
            for e, _ in new:
                offsets.append(size)
                size += align(e.size)
        region = WeightRegion(self.device.memory.alloc(size, tag="weight"), size)
        for (e, const), off in zip(new, offsets):
            self._key((e.tensor, id(const)), const, region.base + off, region)
            self.device.memcpy_sync(const.nbytes, "h2d", _nothing)
            self._unwritten.append((self.device.view(region.base + off, const.dtype, const.shape), const, region))
            self.uploads += 1
            self.uploaded_bytes += const.nbytes

    def write(self) -> None:
        """Move the uploaded weights' bytes (a timing-only run never reads them)."""
        if self._unwritten:   # every computing run asks; only the first after an upload has any
            for view, const, _ in self._unwritten:
                view[...] = const
            self._unwritten = []

    def release(self, regions: list[WeightRegion]) -> None:
        """A plan no longer uses ``regions``: free those no other plan uses."""
        for region in regions:
            region.users -= 1
            if region.users == 0:
                for key in region.keys:
                    del self._at[key]
                    self._named[key[0]].remove(key)
                self._unwritten = [u for u in self._unwritten if u[2] is not region]
                self.device.memory.free(region.base)


def _bytes(a: np.ndarray) -> bytes:
    return np.ascontiguousarray(a).tobytes()


def _const(graph: Graph, e: PlanEntry) -> np.ndarray:
    const = graph.values[e.tensor].const
    assert const is not None   # a planned weight is a constant
    return const

