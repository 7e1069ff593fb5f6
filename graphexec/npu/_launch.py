"""Launching eager work: every kernel, copy and event goes through ``submit``.

Outside a capture ``submit`` launches at once (the host pays the launch cost and goes
on; the simulator runs the task when the host next waits). Inside ``npu.graph(g)`` it
records the launch into the NPUGraph instead, which relaunches it at each replay.
Kernels and copies read their inputs when they start and write when they end, on views
of device memory: nothing here keeps a tensor alive, so a tensor dropped by the program
returns its block to the allocator at once, as PyTorch's do.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from graphexec.npu._plan import OpPlan
from graphexec.npu._state import STATE, Card
from graphexec.runtime.codes import RT_AICORE_EXCEPTION, acl_error
from graphexec.runtime.sim import HOST_COPY_BYTES_PER_US, DeviceTask
from graphexec.runtime.stream import Stream as RtStream

Range = tuple[int, int, str]
FAULTS: dict[int, list[tuple[str, BaseException]]] = {}   # card index -> kernel failures, raised at sync


def submit(card: Card, launch: Callable[[], Any]) -> None:
    """Launch now, or record it into the graph being captured."""
    if STATE.capture is not None:
        STATE.capture.record(card, launch)
    else:
        launch()


def raise_faults(card: Card) -> None:
    """Kernel failures surface at the next synchronizing call, as on hardware."""
    faults = FAULTS.pop(card.index, None)
    if faults:
        name, exc = faults[0]
        raise acl_error(RT_AICORE_EXCEPTION, f"kernel {name!r} failed: {' '.join(str(exc).split())}") from exc


class _Kernel:
    """One launched op's math: read and compute at the task's start, store at its end.

    An object with slots rather than closures: a closure per op carries a cell per free
    variable, and these objects are made once per eager op (the garbage collector counts them).
    """

    __slots__ = ("plan", "ins", "outs", "index")

    def __init__(self, plan: OpPlan, ins: list[np.ndarray], outs: list[np.ndarray], index: int) -> None:
        self.plan, self.ins, self.outs, self.index = plan, ins, outs, index

    def start(self) -> Any:
        plan = self.plan
        values = dict(plan.consts)
        values.update(zip(plan.inputs, self.ins))
        try:
            return plan.runner(values, None)
        except Exception as exc:   # a kernel fault: reported at the next synchronize
            FAULTS.setdefault(self.index, []).append((plan.op, exc))
            return None

    def end(self, result: Any) -> None:
        if result is not None:
            for (name, _, _), view in zip(self.plan.outputs, self.outs):
                view[...] = result[name]


def kernel(card: Card, stream: RtStream, plan: OpPlan, ins: list[np.ndarray], outs: list[np.ndarray],
           reads: Any, writes: Any) -> None:
    """Launch ``plan``'s kernel reading ``ins`` and writing ``outs`` (views of device memory)."""
    k = _Kernel(plan, ins, outs, card.index)
    dev = card.device
    if STATE.capture is None:
        dev.launch(DeviceTask("kernel", stream, plan.op, plan.unit, plan.block_dim, plan.flops, plan.bytes,
                              plan.dtype, "d2d", None, k.start, k.end, plan.meta, reads, writes))
        return

    def launch() -> None:   # each replay launches a task of its own
        dev.launch(DeviceTask("kernel", stream, plan.op, plan.unit, plan.block_dim, plan.flops, plan.bytes,
                              plan.dtype, "d2d", None, k.start, k.end, plan.meta, reads, writes))

    STATE.capture.record(card, launch)


def copy(card: Card, stream: RtStream, kind: str, nbytes: int, read: Callable[[], Any],
         write: Callable[[Any], None], reads: Any = (), writes: Any = ()) -> None:
    """A copy task on ``stream`` (``read`` at its start, ``write`` with what it read at its end)."""
    dev = card.device
    submit(card, lambda: dev.launch(DeviceTask("memcpy", stream, f"memcpy {kind}", unit="copy", bytes=float(nbytes),
                                               copy_kind=kind, start_fn=read, end_fn=write, reads=reads,
                                               writes=writes)))


def stage(card: Card, data: np.ndarray) -> np.ndarray:
    """The host copies pageable memory aside before an asynchronous upload (cudaMemcpyAsync
    from pageable memory returns once its bytes are staged): host time, then a snapshot."""
    card.device.host_t += data.nbytes / HOST_COPY_BYTES_PER_US
    return np.array(data, copy=True, order="C")
