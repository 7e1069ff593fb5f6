"""What a model is before anything runs (``gx.inspect``, ``graphexec inspect MODEL``): its
inputs and outputs (names, dtypes, shapes with their symbolic dims), opsets, op counts by
type, which op types run on own kernels and which go to onnx.reference's fallback, and the
weights' size. The inputs and outputs are also ``Session.inputs`` / ``Session.outputs``,
shaped like onnxruntime's ``get_inputs()``: ``.name``, ``.type``, ``.shape``."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from graphexec.frontend import load
from graphexec.ir import Graph, TensorType
from graphexec.kernels.fallback import is_known
from graphexec.kernels.registry import lookup_def


@dataclass(frozen=True)
class TensorInfo:
    """One graph input or output as declared: ``shape`` holds ints, symbolic names (str)
    and None for a dim nothing names; ``dtype`` is numpy's name (None: undeclared)."""

    name: str
    dtype: str | None
    shape: tuple[int | str | None, ...] | None
    kind: str = "tensor"   # or sequence, map, optional

    @property
    def type(self) -> str:
        """onnxruntime's spelling, ``tensor(float)``; a container's kind when it is not a tensor."""
        if self.kind != "tensor":
            return self.kind
        return f"tensor({ONNX_NAMES.get(self.dtype or '', self.dtype or 'undefined')})"

    @property
    def symbolic(self) -> list[str]:
        """The named dims, in order (each once)."""
        return list(dict.fromkeys(d for d in self.shape or () if isinstance(d, str)))

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "dtype": self.dtype,
                "shape": None if self.shape is None else list(self.shape), "symbolic": self.symbolic}

    def __str__(self) -> str:
        if self.kind != "tensor":
            return f"{self.name}: {self.kind}"
        dims = "?" if self.shape is None else ",".join("?" if d is None else str(d) for d in self.shape)
        return f"{self.name}: {self.dtype or '?'}[{dims}]"


ONNX_NAMES = {"float32": "float", "float64": "double", "float16": "float16", "bfloat16": "bfloat16", "int8": "int8",
              "int16": "int16", "int32": "int32", "int64": "int64", "uint8": "uint8", "uint16": "uint16",
              "uint32": "uint32", "uint64": "uint64", "bool": "bool", "object": "string", "str": "string"}


def tensor_info(name: str, t: TensorType) -> TensorInfo:
    return TensorInfo(name, None if t.dtype is None else np.dtype(t.dtype).name,
                      None if t.shape is None else tuple(t.shape), t.kind)


@dataclass
class Inspection:
    """A model's face (see the module docstring); ``to_dict`` is ``inspect --json``."""

    model: str
    inputs: list[TensorInfo]
    outputs: list[TensorInfo]
    opsets: dict[str, int]
    ops: dict[str, int]                  # op type (domain::op outside ai.onnx) -> nodes, most first
    own_kernels: list[str]               # op types an own kernel runs
    fallback: list[str]                  # op types onnx.reference runs (no own kernel)
    unsupported: list[str]               # op types nothing runs: a run refuses the model
    weight_bytes: int
    num_weights: int
    num_nodes: int = field(default=0)

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "inputs": [i.to_dict() for i in self.inputs],
                "outputs": [o.to_dict() for o in self.outputs],
                "opsets": {(k or "ai.onnx"): v for k, v in self.opsets.items()}, "num_nodes": self.num_nodes,
                "ops": self.ops, "own_kernels": self.own_kernels, "fallback": self.fallback,
                "unsupported": self.unsupported, "weight_bytes": self.weight_bytes, "num_weights": self.num_weights}

    def text(self) -> str:
        """What ``graphexec inspect`` prints."""
        lines = [f"{self.model}: {self.num_nodes} nodes, opsets "
                 + ", ".join(f"{k or 'ai.onnx'} {v}" for k, v in self.opsets.items())]
        for what, infos in (("input", self.inputs), ("output", self.outputs)):
            for info in infos:
                sym = f"  (symbolic: {', '.join(info.symbolic)})" if info.symbolic else ""
                lines.append(f"  {what} {info}{sym}")
        lines.append("  ops: " + ", ".join(f"{op} {n}" for op, n in self.ops.items()))
        lines.append(f"  own kernels: {len(self.own_kernels)} op types; fallback (onnx.reference): "
                     + (", ".join(self.fallback) if self.fallback else "none"))
        if self.unsupported:
            lines.append(f"  unsupported (a run refuses the model): {', '.join(self.unsupported)}")
        lines.append(f"  weights: {self.num_weights} tensors, {self.weight_bytes:,} bytes")
        return "\n".join(lines)


def inspect(graph: Graph | Any) -> Inspection:
    """The face of ``graph`` (a Graph or anything ``gx.load`` reads), before any compile.

    Example:
        >>> print(gx.inspect("models/inception_block.onnx").text())
    """
    graph = graph if isinstance(graph, Graph) else load(graph)
    ops: Counter[str] = Counter()
    runs: dict[str, str] = {}
    for node in graph.nodes:
        label = node.op if node.domain in ("", "ai.onnx") else f"{node.domain}::{node.op}"
        ops[label] += 1
        if label not in runs:
            own = lookup_def(node.op, node.domain, graph.opsets.get(node.domain or "", 1)) is not None
            runs[label] = "own" if own else "fallback" if is_known(node, graph) else "unsupported"
    weights = [v.const for n, v in graph.values.items() if v.const is not None and n not in graph.inputs]
    return Inspection(graph.source, [tensor_info(n, graph.values[n].type) for n in graph.inputs],
                      [tensor_info(n, graph.values[n].type) for n in graph.outputs], dict(graph.opsets),
                      dict(ops.most_common()), sorted(k for k, v in runs.items() if v == "own"),
                      sorted(k for k, v in runs.items() if v == "fallback"),
                      sorted(k for k, v in runs.items() if v == "unsupported"),
                      int(sum(np.asarray(w).nbytes for w in weights)), len(weights), len(graph.nodes))
