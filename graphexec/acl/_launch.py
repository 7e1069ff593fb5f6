"""ACL kernel and callback launches.

A kernel is a registered op name (graphexec.kernels.registry) called on tensor
descriptors, or a Python callable called with its arguments as passed, which reaches
device memory through ``acl.view``. Either way it reads when it starts and its writes
land when it ends: a callable runs at its start against the real bytes, and what it
wrote is put back aside and stored at its end, so unsynchronized readers on other
streams see the old bytes until then, as on hardware.
"""

from __future__ import annotations

import functools
import math
from types import MappingProxyType
from typing import Any, Callable, NamedTuple, Sequence, cast

import numpy as np

from graphexec.acl.state import STATE, api, checked
from graphexec.kernels import registry
from graphexec.kernels.cost import cube_dtype, node_cost, work
from graphexec.runtime import codes
from graphexec.runtime.argcheck import numpy_dtype
from graphexec.runtime.codes import acl_error, invalid_param
from graphexec.runtime.device import Device
from graphexec.runtime.profiles import ROLES
from graphexec.runtime.sim import DeviceTask
from graphexec.runtime.stream import Stream

MAX_BLOCK_DIM = 65535
# shared: a finished task keeps fewer objects alive; read-only, and nothing writes an ACL kernel task's
# meta, so it stands in for DeviceTask.meta's dict
_NO_META = cast("dict[str, Any]", MappingProxyType({}))


class Tensor(NamedTuple):
    """A tensor in device memory, the argument form of registered kernels."""

    ptr: int
    dtype: np.dtype
    shape: tuple[int, ...]

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * np.dtype(self.dtype).itemsize


@checked
def tensor(ptr: int, dtype: Any, shape: tuple[int, ...] | list[int]) -> Tensor:
    """Describe ``shape`` elements of ``dtype`` at device pointer ``ptr``."""
    return Tensor(int(ptr), numpy_dtype(dtype, "tensor"), tuple(int(d) for d in shape))


def _ranges(dev: Device, spec: Any, default: Sequence[Any]) -> tuple[()] | list[tuple[int, int, str]]:
    """Normalize reads=/writes=: pointers (to the end of their allocation) or (ptr, nbytes[, name])."""
    if spec is None:
        spec = default
    if not spec:
        return ()
    out: list[tuple[int, int, str]] = []
    for item in spec:
        if isinstance(item, Tensor):
            item = (item.ptr, item.nbytes)
        ptr, n, name = (item, None, None) if not isinstance(item, tuple) else (item + (None,) * 2)[:3]
        ptr = int(ptr)
        n = dev.memory.extent(ptr) if n is None else int(n)
        dev.memory.segment(ptr, n)   # validates the range now, at launch
        out.append((ptr, n, name or f"{ptr:#x}"))
    return out


def _is_pointer(dev: Device, a: Any) -> bool:
    """Whether a plain argument is a pointer into ``dev``'s live memory (else a value)."""
    if isinstance(a, bool) or not isinstance(a, (int, np.integer)):
        return False
    try:
        dev.memory.segment(int(a))
    except codes.AclError:
        return False
    return True


def _callable_task(dev: Device, fn: Callable[..., Any], args: tuple, writes: Sequence[tuple[int, int, str]],
                   name: str) -> tuple:
    """start/end functions running ``fn`` at start with its writes landing at end."""

    if not writes:
        def run() -> None:
            try:
                fn(*args)
            except Exception as exc:   # a kernel fault: reported at the next synchronize
                STATE.fault(dev, name, exc)
        return run, None

    def start() -> list[np.ndarray] | None:
        spans = [dev.memory.bytes_at(p, n) for p, n, _ in writes]
        before = [s.copy() for s in spans]
        try:
            fn(*args)
            return [s.copy() for s in spans]
        except Exception as exc:   # a kernel fault: reported at the next synchronize
            STATE.fault(dev, name, exc)
            return None
        finally:
            for s, old in zip(spans, before):
                s[...] = old

    def end(after: list[np.ndarray] | None) -> None:
        if after is not None:
            for (p, n, _), data in zip(writes, after):
                dev.memory.bytes_at(p, n)[...] = data

    return start, end


def _registered_task(dev: Device, op: str, fn: Callable[..., Any], ins: list[Tensor], outs: list[Tensor],
                     attrs: dict) -> tuple:
    ctx = registry.OpContext(op, dict(attrs), num_outputs=len(outs), name=op)

    def start() -> list[np.ndarray] | None:
        try:
            results = registry.as_outputs(fn(ctx, *[dev.view(*t) for t in ins]))
            values = [np.array(r, dtype=t.dtype, copy=True).reshape(t.shape) for r, t in zip(results, outs)]
            if len(values) != len(outs):
                raise ValueError(f"{op} returned {len(results)} outputs for {len(outs)} output tensors")
            return values
        except Exception as exc:
            STATE.fault(dev, op, exc)
            return None

    def end(values: list[np.ndarray] | None) -> None:
        if values is not None:
            for t, v in zip(outs, values):
                dev.view(*t)[...] = v

    return start, end


def _registered_cost(op: str, ins: list[Tensor], outs: list[Tensor], attrs: dict) -> Any:
    key = (op, tuple(t.shape for t in ins), sum(t.nbytes for t in ins),
           tuple(t.shape for t in outs), sum(t.nbytes for t in outs))
    return _node_cost(*key) if not attrs else node_cost(key[0], list(key[1]), key[2], list(key[3]), key[4],
                                                       dict(attrs), False)


@functools.lru_cache(maxsize=512)
def _node_cost(op: str, ins: tuple, in_bytes: int, outs: tuple, out_bytes: int) -> Any:
    """The cost rule for attribute-free launches, cached: the same shapes recur in loops."""
    return node_cost(op, list(ins), in_bytes, list(outs), out_bytes, {}, False)


@api
def launch_kernel(kernel: str | Callable[..., Any], block_dim: int, stream: Stream | None, *args: Any,
                  flops: float | None = None, bytes: float | None = None, reads: Any = None,
                  writes: Any = None, unit: str | None = None, dtype: str | None = None,
                  name: str | None = None, attrs: dict | None = None, outputs: int = 1) -> None:
    """aclrtLaunchKernel: enqueue ``kernel`` on ``stream`` with ``block_dim`` blocks (asynchronous).

    Args:
        kernel: a registered op name (args are ``acl.tensor`` descriptors, the last
            ``outputs`` of them written) or a callable (args passed as they are).
        block_dim: blocks, 1..65535; they run on free cores, in waves if too many.
        flops, bytes: the work, for the roofline (registered ops default to their cost rule).
        reads, writes: pointers, ``(ptr, nbytes)`` or ``(ptr, nbytes, name)`` the kernel
            touches, for the hazard checker; a callable defaults to all pointer args.
        unit: the role "cube", "vector" or "aicpu", or the device profile's name for that unit
            ("tensor_core" on a GPU); dtype: the dtype its peak throughput is taken at.
    """
    if isinstance(block_dim, bool) or not isinstance(block_dim, (int, np.integer)) \
            or not 1 <= block_dim <= MAX_BLOCK_DIM:
        raise invalid_param(f"block_dim must be an int in 1..{MAX_BLOCK_DIM}, got {block_dim!r}")
    if unit is not None and not isinstance(unit, str):
        raise invalid_param(f"unit must be a unit's role or name, got {unit!r}")
    try:
        flops, bytes = (None if v is None else work(v, k) for k, v in (("flops", flops), ("bytes", bytes)))
    except ValueError as e:
        raise invalid_param(str(e)) from None
    dev, s = STATE.stream(stream)
    unit = _role(dev.profile, unit)
    if isinstance(kernel, str):
        task = _registered(dev, s, kernel, args, attrs or {}, outputs, name)
        task.block_dim = int(block_dim)
        task.flops = task.flops if flops is None else float(flops)
        task.bytes = task.bytes if bytes is None else float(bytes)
        task.unit, task.dtype = unit or task.unit, dtype or task.dtype
    elif callable(kernel):
        ptrs = [a for a in args if _is_pointer(dev, a)] if args else ()
        label = name or cast(str, getattr(kernel, "__name__", "kernel"))  # a function's __name__ is a str
        rd, wr = _ranges(dev, reads, ptrs), _ranges(dev, writes, ptrs)
        start, end = _callable_task(dev, kernel, args, wr, label)
        task = DeviceTask("kernel", s, label, unit or "vector", int(block_dim), float(flops or 0.0),
                          float(bytes or 0.0), dtype or "float32", start_fn=start, end_fn=end, meta=_NO_META,
                          reads=rd, writes=wr)
    else:
        raise invalid_param(f"kernel must be a registered op name or a callable, got {kernel!r}")
    dev.launch(task)


def _role(profile: Any, unit: str | None) -> str | None:
    """The cost model's role of ``unit``, given as a role or as the profile's name of a unit."""
    if unit is None or unit in ROLES:
        return unit
    named = {name: role for role, name in profile.units.names().items()}
    if unit not in named:
        raise invalid_param(f"unit must be one of {', '.join(ROLES)} or a unit of {profile.name} "
                            f"({', '.join(named)}), got {unit!r}")
    return named[unit]


def _registered(dev: Device, s: Stream, op: str, args: tuple, attrs: dict, outputs: int,
                name: str | None) -> DeviceTask:
    fn = registry.lookup(op)
    if fn is None:
        raise acl_error(codes.RT_KERNEL_LOOKUP, f"no kernel is registered for op {op!r}")
    if not all(isinstance(a, Tensor) for a in args) or not 1 <= outputs <= len(args):
        raise invalid_param(f"kernel {op!r} takes acl.tensor() descriptors, inputs then {outputs} output(s)")
    ins, outs = list(args[:-outputs]), list(args[-outputs:])
    ranges = [(t.ptr, t.nbytes, hex(t.ptr)) for t in args]
    for ptr, n, _ in ranges:
        dev.memory.segment(ptr, n)
    cost = _registered_cost(op, ins, outs, attrs)
    start, end = _registered_task(dev, op, fn, ins, outs, attrs)
    # a cube op's peak rate is its operands' dtype (an int8 GEMM with int32 output runs at the int8 rate)
    dtype = (cube_dtype(op, [np.dtype(t.dtype).name for t in ins], attrs) if cost.unit == "cube" else None) \
        or np.dtype(outs[0].dtype).name
    return DeviceTask("kernel", s, name or op, cost.unit, 1, cost.flops, cost.bytes, dtype,
                      start_fn=start, end_fn=end, meta=_NO_META,
                      reads=ranges[:-outputs], writes=ranges[-outputs:])


@api
def launch_callback(fn: Callable[[Any], Any], user_data: Any, block_type: int, stream: Stream | None) -> None:
    """aclrtLaunchCallback: call ``fn(user_data)`` on the host when ``stream`` reaches it.

    With CALLBACK_BLOCK the stream waits for the callback; with CALLBACK_NO_BLOCK it goes on.
    """
    if not callable(fn):
        raise invalid_param(f"callback must be callable, got {fn!r}")
    if block_type not in (codes.CALLBACK_NO_BLOCK, codes.CALLBACK_BLOCK):
        raise invalid_param(f"block_type must be CALLBACK_BLOCK or CALLBACK_NO_BLOCK, got {block_type!r}")
    dev, s = STATE.stream(stream)
    label = getattr(fn, "__name__", "callback")

    def run() -> None:
        try:
            fn(user_data)
        except Exception as exc:
            STATE.fault(dev, label, exc)

    dev.launch(DeviceTask("callback", s, label, unit="", start_fn=run,
                          meta={"block": block_type == codes.CALLBACK_BLOCK}))
