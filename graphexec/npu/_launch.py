"""Launching eager work: every kernel, copy and event goes through ``submit``.

Outside a capture ``submit`` launches at once (the host pays the launch cost and goes
on; the simulator runs the task when the host next waits). Inside ``npu.graph(g)`` it
records the launch into the NPUGraph instead, which relaunches it at each replay.
Kernels and copies read their inputs when they start and write when they end, on views
of device memory: nothing here keeps a tensor alive, so a tensor dropped by the program
returns its block to the allocator at once, as PyTorch's do.
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any, Callable

import numpy as np

from graphexec import _switch
from graphexec.kernels.quiet import is_quiet, run_quietly
from graphexec.kernels.registry import as_outputs
from graphexec.npu._plan import OpPlan
from graphexec.npu._state import FAULTS, STATE, Card
from graphexec.runtime.codes import RT_AICORE_EXCEPTION, acl_error
from graphexec.runtime.sim import HOST_COPY_BYTES_PER_US, DeviceTask
from graphexec.runtime.stream import Stream as RtStream

Range = tuple[int, int, str]


def submit(card: Card, launch: Callable[[], Any]) -> None:
    """Launch now, or record it into the graph being captured."""
    if STATE.capture is not None:
        STATE.capture.record(card, launch)
    else:
        launch()


QUIET_MIN = 4   # queued tasks from which run_quietly (2.5 us) pays: each kernel spares its errstate (0.7 us)


def waiting(card: Card) -> Any:
    """Around a call that waits for ``card`` (a synchronize, a download, a query): with
    enough work queued, the kernels it runs find numpy's floating-point warnings already
    off (``kernels/quiet.py``) instead of turning them off one kernel at a time. Only speed
    depends on it: the kernels compute the same either way."""
    return run_quietly() if card.device.sim.queued >= QUIET_MIN else nullcontext()


def raise_faults(card: Card) -> None:
    """Kernel failures surface at the next synchronizing call, as on hardware."""
    faults = FAULTS.pop(card.index, None)
    if faults:
        name, exc = faults[0]
        raise acl_error(RT_AICORE_EXCEPTION, f"kernel {name!r} failed: {' '.join(str(exc).split())}") from exc


class Kernel:
    """One launched op's math: read and compute at the task's start (it is the task's
    ``start_fn``), store at its end (``store``, given what the start returned).

    An object with slots, one per op, and no closures or bound methods: ops wait in the
    command queues by the thousand, and every object they hold is one more for each pass
    of the garbage collector.
    """

    __slots__ = ("plan", "ins", "outs", "index")

    def __init__(self, plan: OpPlan, ins: Any, outs: Any, index: int) -> None:
        self.plan, self.ins, self.outs, self.index = plan, ins, outs, index   # each one array, or a list

    def __call__(self) -> Any:
        plan, ins = self.plan, self.ins
        direct = plan.direct
        if direct is not None and not direct.runner.uses_fallback and _switch.FAST:
            try:   # the runner's own call, without its dict of values (see OpPlan.direct), or its ufunc
                f = direct.ufunc
                res = f(ins) if f is not None and is_quiet() else direct.call(ins)
            except Exception:  # noqa: BLE001  (the runner's call below says what went wrong, or falls back)
                pass
            else:
                if type(res) is np.ndarray:
                    return self, res
                v = as_outputs(res)[0]   # as the runner takes a result apart
                return self, np.asarray(v) if isinstance(v, np.generic) else v
        values = dict(plan.consts)
        if type(ins) is np.ndarray:
            values[plan.inputs[0]] = ins
        else:
            values.update(zip(plan.inputs, ins))
        try:
            return self, plan.runner(values, None)
        except Exception as exc:   # a kernel fault: reported at the next synchronize
            FAULTS.setdefault(self.index, []).append((plan.op, exc))
            return None


def store(done: Any) -> None:
    """A kernel's end: its outputs into their device bytes (one array from a direct call,
    else the runner's dict)."""
    if done is None:
        return
    k, result = done
    if type(result) is not dict:
        k.outs[...] = result
        return
    outputs = k.plan.outputs
    if type(k.outs) is np.ndarray:
        k.outs[...] = result[outputs[0][0]]
        return
    for (name, _, _), view in zip(outputs, k.outs):
        view[...] = result[name]


def kernel(card: Card, stream: RtStream, plan: OpPlan, ins: Any, outs: Any, reads: Any, writes: Any) -> None:
    """Launch ``plan``'s kernel reading ``ins`` and writing ``outs`` (views of device memory:
    each one array, or a list of them)."""
    k = Kernel(plan, ins, outs, card.index)
    dev = card.device
    if STATE.capture is None:
        dev.launch(DeviceTask("kernel", stream, plan.op, plan.unit, plan.block_dim, plan.flops, plan.bytes,
                              plan.dtype, "d2d", None, k, store, plan.meta, reads, writes))
        return

    def launch() -> None:   # each replay launches a task of its own
        dev.launch(DeviceTask("kernel", stream, plan.op, plan.unit, plan.block_dim, plan.flops, plan.bytes,
                              plan.dtype, "d2d", None, k, store, plan.meta, reads, writes))

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
