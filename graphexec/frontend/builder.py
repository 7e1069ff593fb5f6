"""The Python builder: graphs in code, with every op checked and typed as it is added.

Example:
    >>> b = gx.GraphBuilder("mlp", opset=17)
    >>> x = b.input("x", "float32", [2, 3])
    >>> h = b.Relu(b.MatMul(x, b.constant(np.ones((3, 4), np.float32), "w")))
    >>> h.type                                   # float32[2x4], known at once
    >>> b.output(h)
    >>> gx.Session(b.build()).run({"x": np.ones((2, 3), np.float32)})
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np
import onnx

from graphexec.errors import GraphError
from graphexec.frontend.infer import infer_node
from graphexec.frontend.opcheck import make_node
from graphexec.frontend.options import annotation_problem
from graphexec.ir import Graph, Node, TensorType, Value, verify


@dataclass(frozen=True)
class Tensor:
    """A value of the graph being built; pass it to ``op`` as an input."""

    name: str
    builder: "GraphBuilder"

    @property
    def type(self) -> TensorType:
        return self.builder.graph.values[self.name].type

    @property
    def shape(self) -> tuple | None:
        return self.type.shape

    @property
    def dtype(self) -> np.dtype | None:
        return self.type.dtype


class GraphBuilder:
    """Builds a Graph: inputs, constants, ops (any ONNX op or custom kernel), outputs.

    ``b.op("Conv", x, w, pads=[1, 1, 1, 1])`` and ``b.Conv(x, w, pads=[1, 1, 1, 1])`` are
    the same. Each op is checked when added (op known, attributes valid, input types
    accepted) and its outputs typed, so a mistake raises ``GraphError`` at its line.
    """

    def __init__(self, name: str = "graph", opset: int | None = None) -> None:
        self.graph = Graph(name, opsets={"": opset or onnx.defs.onnx_opset_version()}, source=f"builder {name!r}")
        self._node_names: set[str] = set()
        self._taken: set[str] = set()  # generated names, reserved as soon as they are made
        self._counts: dict[str, int] = {}   # per base name, the suffix to try next

    def _fresh(self, base: str) -> str:
        """An unused name from ``base``: base, base_1, base_2, ... (counting on from the
        last one given, so n ops of one kind cost O(n), not O(n^2))."""
        i = self._counts.get(base, 0)
        name = f"{base}_{i}" if i else base
        while name in self._taken or name in self.graph.values or name in self._node_names:
            i += 1
            name = f"{base}_{i}"
        self._counts[base] = i + 1
        self._taken.add(name)
        return name

    def input(self, name: str, dtype: Any, shape: Sequence[int | str | None] | None) -> Tensor:
        """A graph input fed at run time; dims may be sizes, symbolic names or None."""
        self._new_value(name)
        t = TensorType(np.dtype(dtype), None if shape is None else tuple(shape))
        self.graph.values[name] = Value(name, t)
        self.graph.inputs.append(name)
        return Tensor(name, self)

    def constant(self, value: Any, name: str | None = None, dtype: Any = None) -> Tensor:
        """A constant (weights, shapes); numpy arrays keep their dtype, Python numbers need ``dtype`` or get numpy's."""
        arr = np.asarray(value, dtype=dtype)
        name = name or self._fresh("const")
        self._new_value(name)
        self.graph.values[name] = Value(name, TensorType(arr.dtype, arr.shape), arr)
        return Tensor(name, self)

    def op(self, op: str, *inputs: Any, outputs: int | Sequence[str] = 1, name: str | None = None,
           domain: str | None = None, stream_label: str | None = None, priority: int | None = None,
           attrs: dict[str, Any] | None = None, **attributes: Any) -> Any:
        """Add a node; returns its output Tensor, or a tuple of them for several outputs.

        Inputs are Tensors, value names, None (an omitted optional input) or arrays
        (made constants). ``attrs`` takes attributes whose names clash with these keywords.
        """
        name = name or self._fresh(op.lower())
        outs = list(outputs) if not isinstance(outputs, int) else [self._fresh(f"{name}_out") for _ in range(outputs)]
        for o in outs:
            self._new_value(o)
        like = self._scalar_dtypes(op, domain, inputs)
        meta = {k: v for k, v in (("stream_label", stream_label), ("priority", priority)) if v is not None}
        for key, value in meta.items():  # the YAML fields' types: a priority is an int 0..7, not True
            if problem := annotation_problem(key, value):
                raise GraphError(f"{self.graph.source}: node {name}: {key}: {problem}")
        names = [self._input(x, t) for x, t in zip(inputs, like)]
        node, issues = make_node(len(self.graph.nodes), self.graph, name, op, domain, names, outs,
                                 {**(attrs or {}), **attributes}, meta)
        self._check(node, issues)
        try:
            types = infer_node(self.graph, node)
        except GraphError as e:
            raise GraphError(f"{self.graph.source}: {e}") from None
        self._node_names.add(name)
        self.graph.nodes.append(node)
        for o, t in zip(outs, types):
            self.graph.values[o] = Value(o, t)
        result = tuple(Tensor(o, self) for o in outs)
        return result[0] if len(result) == 1 else result

    def _scalar_dtypes(self, op: str, domain: str | None, inputs: tuple) -> list[np.dtype | None]:
        """Per input, the dtype a Python number there becomes: that of a tensor input bound to
        the same type variable in the op's schema (Where(c, x, -1.0): x's, not the bool c's),
        else the first tensor input's whose type is not fixed by the schema (None: numpy's own)."""
        first = next((x.dtype for x in inputs if isinstance(x, Tensor)), None)
        try:
            schema = onnx.defs.get_schema(op, self.graph.opsets.get(domain or "", 1), domain or "")
        except (onnx.defs.SchemaError, TypeError):   # a custom kernel or an unknown op: the first tensor's
            return [first] * len(inputs)
        formal = [f.type_str for f in schema.inputs]
        kinds = [formal[min(i, len(formal) - 1)] if formal else "" for i in range(len(inputs))]
        choices = {c.type_param_str: len(c.allowed_type_strs) for c in schema.type_constraints}
        by_kind: dict[str, np.dtype | None] = {}
        for x, k in zip(inputs, kinds):
            if isinstance(x, Tensor) and x.dtype is not None:
                by_kind.setdefault(k, x.dtype)
        free = next((x.dtype for x, k in zip(inputs, kinds) if isinstance(x, Tensor) and choices.get(k, 2) > 1), None)
        return [by_kind.get(k, free) for k in kinds]

    def _check(self, node: Node, issues: list) -> None:
        if issues:
            raise GraphError(f"{self.graph.source}: {issues[0][1]}")
        if node.name in self._node_names:
            raise GraphError(f"{self.graph.source}: node name {node.name!r} is used twice")
        for n in node.inputs:
            if n and n not in self.graph.values:
                raise GraphError(f"{self.graph.source}: node {node} reads {n!r}, which is not in the graph yet")

    def _input(self, x: Any, like: np.dtype | None) -> str:
        """A value name for an op input; a Python number takes the dtype ``like`` (``_scalar_dtypes``)."""
        if x is None:
            return ""
        if isinstance(x, Tensor):
            if x.builder is not self:
                raise GraphError(f"{self.graph.source}: tensor {x.name!r} belongs to another builder")
            return x.name
        if isinstance(x, str):
            return x
        if isinstance(x, (int, float, bool)) and like is not None:
            if like.kind in "biu" and not _exact(x, like):
                raise GraphError(f"{self.graph.source}: the number {x!r} cannot be {like} exactly (the dtype it takes "
                                 "from the op's tensor inputs); pass a constant of the dtype you mean")
            return self.constant(x, dtype=like).name
        return self.constant(x).name

    def _new_value(self, name: str) -> None:
        if not name or name in self.graph.values:
            raise GraphError(f"{self.graph.source}: value name {name!r} is empty or already used")

    def output(self, *tensors: Tensor | str) -> None:
        """Mark values as graph outputs, in order."""
        for t in tensors:
            name = t.name if isinstance(t, Tensor) else t
            if name not in self.graph.values:
                raise GraphError(f"{self.graph.source}: output {name!r} is not a value of the graph")
            self.graph.outputs.append(name)

    def build(self) -> Graph:
        """The finished graph, verified; the builder can go on and build again."""
        if not self.graph.outputs:
            raise GraphError(f"{self.graph.source}: the graph has no outputs; call output() first")
        graph = copy.copy(self.graph)
        graph.nodes = list(self.graph.nodes)
        graph.values = {k: copy.copy(v) for k, v in self.graph.values.items()}
        graph.inputs, graph.outputs = list(self.graph.inputs), list(self.graph.outputs)
        graph.opsets, graph.meta = dict(self.graph.opsets), dict(self.graph.meta)
        graph.source = "<builder>"
        verify(graph)
        return graph

    def __getattr__(self, op: str) -> Callable[..., Any]:
        if not op[:1].isupper():
            raise AttributeError(op)
        return lambda *inputs, **kw: self.op(op, *inputs, **kw)


def _exact(x: int | float | bool, dtype: np.dtype) -> bool:
    """Whether ``dtype`` holds the number ``x`` as it is (an integer or bool dtype may not)."""
    try:
        return bool(np.asarray(x, dtype=dtype) == x)
    except (OverflowError, ValueError):   # numpy 2 refuses out-of-range Python ints outright
        return False
