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


def node_cases_without_fallback(pattern: str) -> list[tuple[str, bool, list[str]]]:
    """Run the ONNX backend node tests whose name matches ``pattern`` (a regex) as the
    conformance suite does; per case: its name, whether it passed, and the ops it ran
    through the reference fallback (an own kernel should leave this empty)."""
    import re
    import sys
    import warnings
    from pathlib import Path

    import graphexec as gx

    sys.path.insert(0, str(Path(__file__).parent / "e2e"))
    from node_suite import _normalize, collect, run_case

    out = []
    for case in collect():
        if not re.search(pattern, case.name):
            continue
        res = run_case(case)
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            session = gx.Session(gx.load(case.model))
            inputs = case.data_sets[0][0]
            feeds = dict(zip(session.graph.inputs, [_normalize(x) for x in inputs]))
            session.run(feeds)
            runners = session.compile(feeds).plan.runners.values()
        out.append((case.name, res.ok, sorted(r.node.op for r in runners if getattr(r, "uses_fallback", False))))
    return out
