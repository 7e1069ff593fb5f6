"""The executor over a device as two free functions: ``load(plan, device)`` and
``run(loaded, feeds, ...)``.

A ``Plan`` (``plan/compiled.py``) belongs to no device. ``load`` puts it on one: the io
and activation pools allocated from the device's memory, the weights placed (uploaded
once per device when the plans share a ``WeightStore``), the views of every planned
value primed, the fast paths built (the replay steps, the compiled event loop's task
list). ``run`` copies feeds in, launches the task list, synchronizes and copies the
outputs out, on the device's running clock (``runtime/host.py``). A ``Session`` is these
two over one device that outlives its plans (``engine/resident.py``).

Example:
    >>> plan = compile(clone_graph(graph), CompileOptions(input_types=types), profile)
    >>> loaded = load(plan, Device(profile))
    >>> run(loaded, feeds).outputs
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from graphexec.engine.compiled import Compiled
from graphexec.engine.result import Result
from graphexec.engine.threads import Workers
from graphexec.engine.weights import WeightStore
from graphexec.errors import GraphExecError
from graphexec.plan import Plan
from graphexec.runtime.device import Device

Loaded = Compiled   # a plan loaded onto a device: what ``load`` returns and ``run`` takes


def load(plan: Plan, device: Device | None = None, *, weights: WeightStore | None = None,
         compile_s: float = 0.0) -> Loaded:
    """``plan`` on ``device`` (None: a device of its own), its weights in ``weights`` (the
    device's shared store, so that plans of one model hold one copy; None: a store of
    its own). Raises OutOfMemoryError, naming the largest tensor, when it cannot fit."""
    if weights is not None:
        if device is not None and weights.device is not device:
            raise GraphExecError("load: the weight store belongs to another device")
        device = weights.device
    return Compiled(plan, compile_s, device, weights, own=True)


def run(loaded: Loaded, feeds: Mapping[str, Any], *, workers: Workers | None = None, compute: bool = True,
        keep: Iterable[str] = ()) -> Result:
    """One run of ``loaded`` on ``feeds`` (name -> array or ``DeviceTensor``): with
    ``compute=False`` timing only; ``keep`` names outputs to leave on the device."""
    return loaded.run(feeds if type(feeds) is dict else dict(feeds), workers, compute, frozenset(keep))
