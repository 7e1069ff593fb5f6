"""Custom kernels: user numpy functions with their own shape rule and cost rule.

``@gx.kernel("MyOp", shape=..., cost=...)`` puts the function in the one kernel registry
under a custom domain, with its rules in the same entry, so YAML graphs, the builder and
ONNX files that use that domain all find it, and shape inference and the cost model find
its rules: a custom op is then lowered, scheduled and costed like any other.

Example:
    >>> @gx.kernel("Swish", shape="same", cost=lambda c: {"flops": 4 * c.out_elements})
    ... def swish(x, *, beta=1.0):
    ...     return (x / (1 + np.exp(-beta * x))).astype(x.dtype)
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from graphexec.errors import GraphError, GraphExecError
from graphexec.ir import TensorType
from graphexec.kernels import registry
from graphexec.kernels.cost import MAX_BLOCK_DIM, Cost, node_cost, work

CUSTOM_DOMAIN = "graphexec.custom"
UNITS = ("cube", "vector", "aicpu")

ShapeRule = Callable[..., Any] | str | None
CostRule = Callable[["CostInput"], Any] | None


@dataclass(frozen=True, slots=True)
class CostInput:
    """What a cost rule sees: the static shapes and byte counts of one node."""

    inputs: list[tuple[int, ...] | None]
    outputs: list[tuple[int, ...] | None]
    in_bytes: int
    out_bytes: int
    attrs: dict[str, Any]

    @property
    def out_elements(self) -> int:
        """Elements of the first output (1 when unknown), the usual unit of vector work."""
        shape = self.outputs[0] if self.outputs else None
        return int(np.prod(shape, dtype=np.int64)) if shape else 1


@dataclass(frozen=True, slots=True)
class CustomKernel:
    """A registered custom kernel: the user's function and its two rules.

    ``positional``: the shape rule gets every input by position, None for an omitted
    optional one (ops with many optional inputs: contrib_shapes.py); otherwise only the
    inputs present, in order.
    """

    op: str
    domain: str
    fn: Callable[..., Any]
    shape: ShapeRule
    cost: CostRule
    positional: bool = False
    user: bool = False   # registered with gx.kernel: a bare op name in YAML finds it (built-ins need their domain)


def kernel(op: str, *, shape: ShapeRule = None, cost: CostRule = None,
           domain: str = CUSTOM_DOMAIN) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator: register ``fn(*inputs, **attrs)`` as the kernel of ``domain::op``.

    Args:
        shape: ``"same"`` (output typed like input 0), or ``rule(*input_types, **attrs)``
            returning a TensorType, a shape (dtype of input 0) or a list of them.
        cost: ``rule(CostInput)`` returning a dict with any of flops, bytes, unit
            ("cube", "vector", "aicpu") and block_dim; the rest keep the default rule.
        domain: a custom domain; the ONNX domains cannot be overridden this way.
    """
    if not op.isidentifier():
        raise GraphExecError(f"custom kernel name {op!r} must be an identifier")
    if domain in ("", "ai.onnx"):
        raise GraphExecError(f"custom kernel {op!r} needs its own domain, not the ONNX one")

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        spec = CustomKernel(op, domain, fn, shape, cost, user=True)
        registry.register(op, domain, rules=spec)(lambda ctx, *xs: _run(spec, ctx.attrs, xs))
        return fn

    return wrap


def lookup_custom(op: str, domain: str, opset: int = 10_000) -> CustomKernel | None:
    """The custom kernel of ``domain::op`` at ``opset`` (its registry entry's rules), or None."""
    d = registry.lookup_def(op, domain, opset)
    return d.rules if d is not None and isinstance(d.rules, CustomKernel) else None


def domains_of(op: str) -> list[str]:
    """The domains of the user's kernels that define ``op``, sorted: how a bare ``op:`` is
    resolved (a built-in contrib op is named with its domain, as in ONNX)."""
    return sorted({d.domain for d in registry.definitions_of(op)
                   if isinstance(d.rules, CustomKernel) and d.rules.user})


def _run(spec: CustomKernel, attrs: dict[str, Any], inputs: tuple) -> tuple[np.ndarray, ...]:
    try:
        result = spec.fn(*inputs, **attrs)
    except (ValueError, TypeError, IndexError, FloatingPointError, registry.Unsupported):
        raise
    except Exception as e:  # noqa: BLE001  (the user's code: a KernelError naming the node, not a crash)
        raise ValueError(f"{type(e).__name__}: {e}") from None
    outs = tuple(np.asarray(o) for o in registry.as_outputs(result))
    expected = output_types(spec, [TensorType(x.dtype, x.shape) for x in inputs if x is not None], attrs)
    for i, (got, want) in enumerate(zip(outs, expected or [])):
        if want.dtype is not None and want.shape is not None and (got.dtype, got.shape) != (want.dtype, want.shape):
            # a float64 slipping out of numpy would silently change the planned buffers
            raise ValueError(f"output {i} is {TensorType(got.dtype, got.shape)}, its shape rule says {want}")
    return outs


def output_types(spec: CustomKernel, inputs: Sequence[TensorType | None],
                 attrs: dict[str, Any]) -> list[TensorType] | None:
    """The output types by the kernel's shape rule; None when it has none or inputs are unknown.

    ``inputs`` are the node's, None for an omitted optional one. A rule function only sees
    static types; ``"same"`` passes symbolic dims through too.
    """
    present = [t for t in inputs if t is not None]
    if spec.shape == "same":
        return [present[0]] if present and present[0].dtype is not None else None
    if spec.shape is None or not all(t.is_static for t in present):
        return None
    if isinstance(spec.shape, str):
        raise GraphError(f"custom kernel {spec.op}: shape rule {spec.shape!r} is not 'same' or a function")
    try:
        result = spec.shape(*(inputs if spec.positional else present), **attrs)
    except Exception as e:  # noqa: BLE001  (user code)
        raise GraphError(f"shape rule of {spec.domain}::{spec.op} failed on {', '.join(map(str, inputs))}: "
                         f"{type(e).__name__}: {e}") from None
    return _as_types(spec, result, present)


def _as_types(spec: CustomKernel, result: Any, inputs: Sequence[TensorType]) -> list[TensorType]:
    dtype = inputs[0].dtype if inputs else np.dtype(np.float32)
    if isinstance(result, TensorType):
        return [result]
    if isinstance(result, (tuple, list)) and all(isinstance(d, (int, np.integer)) for d in result):
        return [TensorType(dtype, tuple(int(d) for d in result))]
    if isinstance(result, (tuple, list)) and result:
        return [t for r in result for t in _as_types(spec, r, inputs)]
    raise GraphError(f"shape rule of {spec.domain}::{spec.op} returned {result!r}; "
                     "expected a TensorType, a shape, or a list of them")


def custom_cost(op: str, domain: str, c: CostInput) -> Cost | None:
    """The custom cost of a node, the default rule's where the custom rule says nothing;
    None without a cost rule (node_cost's own rules then apply, com.microsoft's included)."""
    spec = lookup_custom(op, domain)
    if spec is None or spec.cost is None:
        return None
    base = node_cost(op, c.inputs, c.in_bytes, c.outputs, c.out_bytes, c.attrs, False)
    try:
        got = spec.cost(c)
    except Exception as e:  # noqa: BLE001  (user code)
        raise GraphError(f"cost rule of {domain}::{op} failed: {type(e).__name__}: {e}") from None
    fields = dataclasses.asdict(got) if isinstance(got, Cost) else dict(got or {})
    unknown = sorted(set(fields) - {"flops", "bytes", "unit", "block_dim"})
    if unknown or fields.get("unit", base.unit) not in UNITS:
        raise GraphError(f"cost rule of {domain}::{op} returned {got!r}; expected keys flops, bytes, "
                         f"unit ({', '.join(UNITS)}), block_dim")
    for key in ("flops", "bytes"):
        if key in fields:
            try:
                fields[key] = work(fields[key], key)
            except ValueError as e:
                raise GraphError(f"cost rule of {domain}::{op} returned {e}") from None
    if "block_dim" in fields:
        fields["block_dim"] = max(1, min(int(fields["block_dim"]), MAX_BLOCK_DIM))
    return dataclasses.replace(base, **fields)
