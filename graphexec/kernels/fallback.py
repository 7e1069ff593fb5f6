"""Run a node through onnx's reference implementation, for ops without an own kernel.

One ReferenceEvaluator per node is built on first use and kept, so the fallback costs
its set-up once per session, not once per run.
"""

from __future__ import annotations

from typing import Any

import onnx
from onnx import helper
from onnx.reference import ReferenceEvaluator

from graphexec.errors import UnsupportedOpError
from graphexec.ir import Graph, Node

# ops onnx.reference knows in no opset table but handles anyway
_REFERENCE_DOMAINS = ("", "ai.onnx.ml", "ai.onnx.preview", "ai.onnx.preview.training", "experimental")


def is_known(node: Node, graph: Graph) -> bool:
    """True when onnx's reference can run ``node`` (a standard op or a local function)."""
    if any(f.name == node.op and f.domain == node.domain for f in graph.functions):
        return True
    if node.domain not in _REFERENCE_DOMAINS:
        return False
    version = graph.opsets.get(node.domain, 1)
    try:
        from onnx.reference.ops import load_op

        load_op(node.domain, node.op, version)
        return True
    except Exception:  # noqa: BLE001  (load_op raises several unrelated types)
        return onnx.defs.has(node.op, node.domain)


class Fallback:
    """A callable that runs one node with ``onnx.reference``."""

    def __init__(self, node: Node, graph: Graph) -> None:
        self.node = node
        names = [n for n in node.inputs if n] + node.implicit_inputs
        self.input_names = list(dict.fromkeys(names))
        outs = [o for o in node.outputs if o]
        proto = node.proto if node.proto is not None else helper.make_node(
            node.op, node.inputs, node.outputs, domain=node.domain, **node.attrs)
        g = helper.make_graph([proto], node.name, [onnx.ValueInfoProto(name=n) for n in self.input_names],
                              [onnx.ValueInfoProto(name=n) for n in outs])
        opsets = [helper.make_opsetid(d, v) for d, v in graph.opsets.items()]
        model = helper.make_model(g, opset_imports=opsets, functions=graph.functions)
        self.model = model
        self._evaluator: ReferenceEvaluator | None = None
        self.outputs = outs

    def __call__(self, feeds: dict[str, Any]) -> dict[str, Any]:
        if self._evaluator is None:
            try:
                self._evaluator = ReferenceEvaluator(self.model)
            except Exception as e:  # noqa: BLE001
                raise UnsupportedOpError(f"node {self.node}: onnx reference cannot run op "
                                         f"{self.node.domain or 'ai.onnx'}::{self.node.op}: {e}") from None
        res = self._evaluator.run(None, {n: feeds[n] for n in self.input_names})
        return dict(zip(self.outputs, res))
