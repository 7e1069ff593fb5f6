"""The kernel registry: one small numpy function per op.

A kernel is registered with ``@register("Relu")`` and called as
``fn(ctx, *inputs)`` where ``ctx`` is an :class:`OpContext` (attributes, opset) and
``inputs`` are numpy arrays (``None`` for an omitted optional input). It returns one
array or a tuple of arrays, one per node output.

A kernel registered with ``out=True`` also takes ``out=``: an array of the output's
planned shape and dtype (device memory it may compute into, or None). It returns
``out`` when it used it, or a new array when it did not (a shape it did not expect).

A kernel that meets a case it does not handle (an exotic attribute, an old opset)
raises :class:`Unsupported`; the executor then runs the node through onnx's
reference implementation instead, so coverage never depends on our own kernels.
A kernel may also register ``check=``: ``check(ctx)`` returns why it refuses the node's
attributes (or None), asked at compile time where no fallback could run the node either,
so such a node fails at compile rather than at its first run.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable, TypeGuard

import numpy as np

KernelFn = Callable[..., Any]
CheckFn = Callable[["OpContext"], "str | None"]
# ``bind(ctx, *args, out=None)``: the kernel's call on these very arguments as one zero-argument
# call that returns exactly what ``fn`` would (numpy's warnings off, as ``run_quietly`` leaves
# them), or None where that is not known ahead; a plan's replay binds each kernel once
BindFn = Callable[..., "Callable[[], Any] | None"]
# ``cost(in_shapes, out_shapes, moved_bytes, attrs)``: the node's ``kernels.cost.Cost`` from its
# static shapes (None where unknown), or None to leave it to the default rule
CostFn = Callable[[list, list, float, dict], Any]

_MISSING = object()


class Unsupported(Exception):
    """Raised by a kernel for a case it leaves to the onnx reference fallback."""


@dataclass(frozen=True, slots=True)
class OpContext:
    """What a kernel knows about its node besides the input arrays.

    Attributes:
        op: the op type, e.g. ``"Conv"``.
        attrs: attribute values as Python objects (int, float, str, lists, numpy
            arrays for tensors, ``onnx.GraphProto`` for subgraphs).
        opset: the opset version of the node's domain in the model.
        num_outputs: how many outputs the node declares (some may be ``""``).
        name: the node name, for error messages.
        const_inputs: per input, whether it is a constant of the graph (same every run).
        cache: what a kernel derives from its constant inputs once (e.g. re-laid-out
            filters), kept for the node's later runs.
    """

    op: str
    attrs: dict[str, Any] = field(default_factory=dict)
    opset: int = 21
    num_outputs: int = 1
    name: str = ""
    const_inputs: tuple[bool, ...] = ()
    cache: dict[str | tuple[Any, ...], Any] = field(default_factory=dict, compare=False)

    def attr(self, key: str, default: Any = _MISSING) -> Any:
        """Return attribute ``key`` or ``default``; raise ``Unsupported`` if absent without one."""
        if key in self.attrs:
            return self.attrs[key]
        if default is _MISSING:
            raise Unsupported(f"{self.op} needs attribute {key!r}")
        return default


@dataclass(frozen=True, slots=True)
class KernelDef:
    """A registered kernel: the function plus the opset range it serves; a custom kernel
    also keeps its shape and cost rules here (``rules``, see ``kernels/custom.py``), and
    ``check`` says at compile time why the kernel refuses a node's attributes; ``bind``
    makes its call on fixed arguments (see ``BindFn``); ``cost`` is the op's own cost rule
    (see ``CostFn``), where the default (elements touched) is far from its work."""

    op: str
    domain: str
    fn: KernelFn
    since: int = 1
    until: int = 10_000
    out: bool = False
    rules: Any = None
    check: CheckFn | None = None
    bind: BindFn | None = None
    cost: CostFn | None = None


_REGISTRY: dict[tuple[str, str], list[KernelDef]] = {}
_DOMAINS: dict[str, set[str]] = {}   # op -> the domains that register it (a builder asks per node)


def register(op: str, domain: str = "", since: int = 1, until: int = 10_000,
             out: bool = False, rules: Any = None, check: CheckFn | None = None,
             bind: BindFn | None = None, cost: CostFn | None = None) -> Callable[[KernelFn], KernelFn]:
    """Decorator: register ``fn`` as the kernel of ``op`` for opsets ``since..until``.

    Example:
        >>> @register("Relu")
        ... def relu(ctx, x):
        ...     return np.maximum(x, 0)
    """

    def wrap(fn: KernelFn) -> KernelFn:
        defs = _REGISTRY.setdefault((domain, op), [])
        _DOMAINS.setdefault(op, set()).add(domain)
        defs[:] = [d for d in defs if (d.since, d.until) != (since, until)]
        defs.append(KernelDef(op, domain, fn, since, until, out, rules, check, bind, cost))
        return fn

    return wrap


def update(op: str, domain: str = "", opset: int = 10_000, **changes: Any) -> KernelDef:
    """Give the registration serving ``op`` at ``opset`` new fields (``rules=``, ``check=``),
    keeping its function: how a module adds rules to kernels registered elsewhere (a new
    ``fn`` drops the old ``bind``, unless one is given)."""
    old = lookup_def(op, domain, opset)
    if old is None:
        raise KeyError(f"no kernel registered for {domain or 'ai.onnx'}::{op} at opset {opset}")
    if "fn" in changes and "bind" not in changes:   # the old bind made the old function's calls
        changes["bind"] = None
    new = replace(old, **changes)
    defs = _REGISTRY[(old.domain, op)]
    defs[defs.index(old)] = new
    return new


def lookup(op: str, domain: str = "", opset: int = 10_000) -> KernelFn | None:
    """The kernel registered for ``op`` at ``opset``, or None."""
    d = lookup_def(op, domain, opset)
    return None if d is None else d.fn


def lookup_def(op: str, domain: str = "", opset: int = 10_000) -> KernelDef | None:
    """The registration serving ``op`` at ``opset`` (function and whether it takes ``out=``)."""
    if domain == "ai.onnx":
        domain = ""
    for d in _REGISTRY.get((domain, op), ()):
        if d.since <= opset <= d.until:
            return d
    return None


def cost_rule(op: str, domain: str = "") -> CostFn | None:
    """The own cost rule of ``op`` (its newest registration's), or None."""
    defs = _REGISTRY.get(("" if domain == "ai.onnx" else domain, op))
    return defs[-1].cost if defs else None


def fits(out: np.ndarray | None, shape: tuple[int, ...], dtype: Any) -> TypeGuard[np.ndarray]:
    """Whether a kernel may compute a result of ``shape`` and ``dtype`` into ``out``."""
    return out is not None and out.shape == shape and out.dtype == dtype


def registered_ops() -> list[tuple[str, str]]:
    """Every (domain, op) with an own kernel, sorted."""
    return sorted(_REGISTRY)


def definitions() -> list[KernelDef]:
    """Every registration, by (domain, op) and then in registration order."""
    return [d for key in sorted(_REGISTRY) for d in _REGISTRY[key]]


def definitions_of(op: str) -> list[KernelDef]:
    """The registrations of ``op`` in any domain, by domain and then in registration order."""
    return [d for domain in sorted(_DOMAINS.get(op, ())) for d in _REGISTRY[(domain, op)]]


def as_outputs(result: Any) -> tuple[Any, ...]:
    """Normalize a kernel's return value to a tuple of outputs.

    Only a tuple means several outputs: a list is one ONNX sequence value. Items are
    arrays, numpy scalars (a 0-d result), or such host values (hence ``Any``).
    """
    if isinstance(result, tuple):
        return result
    return (result,)
