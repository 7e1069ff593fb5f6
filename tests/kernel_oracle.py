"""Compare one of our kernels with onnx's reference implementation on one node."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import helper
from onnx.reference import ReferenceEvaluator

from graphexec.frontend.attrs import decode_attrs
from graphexec.kernels import registry
from graphexec.kernels.registry import OpContext, as_outputs


def run_ours(op: str, inputs: list[np.ndarray | None], attrs: dict[str, Any], opset: int, num_outputs: int = 1):
    """Run our registered kernel for ``op`` (attrs go through ONNX encoding and back)."""
    import graphexec.kernels  # noqa: F401  (registers every kernel)

    node = helper.make_node(op, [f"x{i}" if x is not None else "" for i, x in enumerate(inputs)],
                            [f"y{i}" for i in range(num_outputs)], **attrs)
    fn = registry.lookup(op, "", opset)
    assert fn is not None, f"no kernel for {op} at opset {opset}"
    ctx = OpContext(op, decode_attrs(node), opset, num_outputs, "n")
    return as_outputs(fn(ctx, *inputs))


def run_reference(op: str, inputs: list[np.ndarray | None], attrs: dict[str, Any], opset: int, num_outputs: int = 1):
    """Run onnx's reference evaluator on a one-node model."""
    names = [f"x{i}" if x is not None else "" for i, x in enumerate(inputs)]
    outs = [f"y{i}" for i in range(num_outputs)]
    node = helper.make_node(op, names, outs, **attrs)
    graph = helper.make_graph([node], "g", [onnx.ValueInfoProto(name=n) for n in names if n],
                              [onnx.ValueInfoProto(name=n) for n in outs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    feeds = {n: x for n, x in zip(names, inputs) if n}
    return tuple(ReferenceEvaluator(model).run(None, feeds))


def check_kernel(op: str, inputs: list[np.ndarray | None], attrs: dict[str, Any] | None = None,
                 opset: int = 21, num_outputs: int = 1, rtol: float = 1e-5, atol: float = 1e-6) -> None:
    """Assert our kernel equals the reference in shape, dtype and values."""
    attrs = attrs or {}
    ours = run_ours(op, inputs, attrs, opset, num_outputs)
    ref = run_reference(op, inputs, attrs, opset, num_outputs)
    assert len(ours) == len(ref)
    for o, r in zip(ours, ref):
        o, r = np.asarray(o), np.asarray(r)
        assert o.shape == r.shape, f"{op}: shape {o.shape} != {r.shape}"
        assert o.dtype == r.dtype, f"{op}: dtype {o.dtype} != {r.dtype}"
        np.testing.assert_allclose(o, r, rtol=rtol, atol=atol, err_msg=op)
