"""The IR: plain dataclasses for graphs, nodes, values and their types.

Passes annotate nodes through ``Node.meta`` (as torch.fx does) instead of adding
attributes, so the IR stays the same whichever passes ran.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterator, cast

import numpy as np

Dim = int | str | None  # a size, a symbolic name, or unknown
_OBJECT = np.dtype(object)


@dataclass(frozen=True, slots=True)
class TensorType:
    """dtype and shape of a value; either may be unknown (None).

    ``kind`` is "tensor" for ordinary tensors and "sequence"/"optional"/"map" for the
    ONNX container types, which live on the host, never in the device pool; ``elem`` is a
    container's whole type in ONNX's notation (``seq(map(int64,tensor(float)))``) where known.
    """

    dtype: np.dtype | None = None
    shape: tuple[Dim, ...] | None = None
    kind: str = "tensor"
    elem: str | None = None
    _static: bool = field(init=False, repr=False, compare=False)
    _nbytes: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # the type is immutable, and passes ask these of every value many times
        static = (self.kind == "tensor" and self.dtype is not None and self.dtype != _OBJECT
                  and self.shape is not None and all(isinstance(d, int) and d >= 0 for d in self.shape))
        object.__setattr__(self, "_static", static)
        object.__setattr__(self, "_nbytes", math.prod(cast("tuple[int, ...]", self.shape))
                           * cast(np.dtype, self.dtype).itemsize if static else -1)

    @property
    def is_static(self) -> bool:
        """True when the bytes of the value are known at compile time."""
        return self._static

    @property
    def nbytes(self) -> int:
        """Size in bytes; only meaningful for a static type."""
        assert self._static
        return self._nbytes   # Python ints: hostile dims do not wrap

    def __str__(self) -> str:
        if self.kind != "tensor":
            return self.kind
        dt = "?" if self.dtype is None else self.dtype.name
        shape = "?" if self.shape is None else "x".join("?" if d is None else str(d) for d in self.shape)
        return f"{dt}[{shape}]"


@dataclass(eq=False, slots=True)
class Value:
    """A named value: a graph input, a node output, or a constant (``const`` set)."""

    name: str
    type: TensorType = field(default_factory=TensorType)
    const: np.ndarray | None = None


@dataclass(eq=False, slots=True)
class Node:
    """One operation. ``inputs`` may hold "" for omitted optional inputs.

    ``implicit_inputs`` are outer-scope names read by the node's subgraphs (If, Loop,
    Scan); they are dependencies like ordinary inputs. ``proto`` keeps the ONNX node
    for the reference fallback and for export.
    """

    name: str
    op: str
    inputs: list[str]
    outputs: list[str]
    attrs: dict[str, Any] = field(default_factory=dict)
    domain: str = ""
    implicit_inputs: list[str] = field(default_factory=list)
    proto: Any = None
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def all_inputs(self) -> list[str]:
        """Every name the node reads, explicit then implicit, without the omitted ones."""
        return [n for n in self.inputs if n] + self.implicit_inputs

    def __str__(self) -> str:
        return f"{self.name or '<unnamed>'} ({self.op})"


@dataclass(eq=False)
class Graph:
    """A computation graph: nodes in topological order plus every value they touch.

    Attributes:
        inputs: names of the values fed at run time (never the constants).
        outputs: names of the graph outputs, in order.
        opsets: opset version per domain ("" is the default ONNX domain).
        functions: model-local ONNX functions, handed to the reference fallback.
        source: where it came from (a path, "<builder>"), for error messages.
    """

    name: str
    nodes: list[Node] = field(default_factory=list)
    values: dict[str, Value] = field(default_factory=dict)
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    opsets: dict[str, int] = field(default_factory=dict)
    functions: list[Any] = field(default_factory=list)
    source: str = "<graph>"
    meta: dict[str, Any] = field(default_factory=dict)

    def value(self, name: str) -> Value:
        """The value called ``name``, created with an unknown type if new."""
        v = self.values.get(name)
        if v is None:
            v = self.values[name] = Value(name)
        return v

    @property
    def constants(self) -> dict[str, np.ndarray]:
        """Initializers and folded constants by name."""
        return {n: v.const for n, v in self.values.items() if v.const is not None}

    def producers(self) -> dict[str, Node]:
        """Map from value name to the node that writes it."""
        return {o: n for n in self.nodes for o in n.outputs if o}

    def consumers(self) -> dict[str, list[Node]]:
        """Map from value name to the nodes that read it, in node order."""
        users: dict[str, list[Node]] = {}
        for n in self.nodes:
            for i in dict.fromkeys(n.all_inputs):
                users.setdefault(i, []).append(n)
        return users

    def __iter__(self) -> Iterator[Node]:
        return iter(self.nodes)

    def __len__(self) -> int:
        return len(self.nodes)
