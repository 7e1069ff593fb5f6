"""Run a node through onnx's reference implementation, for ops without an own kernel.

One ReferenceEvaluator per node is built on first use and kept, so the fallback costs
its set-up once per session, not once per run.
"""

from __future__ import annotations

from typing import Any, Callable

import onnx
from onnx import helper
from onnx.reference import ReferenceEvaluator
from onnx.reference.op_run import RuntimeContextError

from graphexec.errors import UnsupportedOpError
from graphexec.ir import Graph, Node

# ops onnx.reference knows in no opset table but handles anyway
_REFERENCE_DOMAINS = ("", "ai.onnx.ml", "ai.onnx.preview", "ai.onnx.preview.training", "experimental")


def is_known(node: Node, graph: Graph) -> bool:
    """True when onnx's reference can run ``node`` at the model's opset (a standard op or
    a local function): decided here, at compile time, so a node nothing can run is refused
    before the first run rather than during it."""
    if any(f.name == node.op and f.domain == node.domain for f in graph.functions):
        return True
    if node.domain not in _REFERENCE_DOMAINS:
        return False
    try:
        version = graph.opsets.get(node.domain, 1)
        if node.domain:
            _loader(node.domain)(node.domain, node.op, version)
        else:  # the evaluator class lets it expand an op that a function body defines
            _loader("")("", node.op, version, evaluator_cls=ReferenceEvaluator)
        return True
    except RuntimeContextError:  # a function whose body depends on the input types: built at run time
        return True
    except Exception:  # noqa: BLE001  (load_op raises several unrelated types)
        return False


def _loader(domain: str) -> Callable[..., Any]:
    """The reference's op loader of ``domain`` (each domain has its own table)."""
    if domain == "ai.onnx.ml":
        from onnx.reference.ops.aionnxml import load_op
    elif domain == "ai.onnx.preview":
        from onnx.reference.ops.aionnx_preview import load_op
    elif domain == "ai.onnx.preview.training":
        from onnx.reference.ops.aionnx_preview_training import load_op
    elif domain == "experimental":
        from onnx.reference.ops.experimental import load_op
    else:
        from onnx.reference.ops import load_op
    return load_op


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
