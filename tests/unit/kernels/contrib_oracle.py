"""Run one com.microsoft node through graphexec and through onnxruntime (the oracle)."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import onnx
from onnx import helper

import graphexec as gx
from graphexec.kernels import contrib_shapes

RNG = np.random.default_rng(7)


def rand(*shape: int, dtype: Any = np.float32, scale: float = 1.0) -> np.ndarray:
    return (RNG.standard_normal(shape) * scale).astype(dtype)


def one_node(op: str, inputs: Sequence[np.ndarray | None], num_outputs: int = 1, domain: str = "com.microsoft",
             outputs: Sequence[str] | None = None, opset: int = 17, out_dtype: Any = None,
             **attrs: Any) -> onnx.ModelProto:
    """A model of one node; omitted optional inputs are ``None``, omitted outputs ``""`` in ``outputs``.

    Outputs are untyped unless ``out_dtype`` types them all (where ORT cannot infer one).
    """
    names = [f"in{i}" if x is not None else "" for i, x in enumerate(inputs)]
    outs = list(outputs) if outputs is not None else [f"out{i}" for i in range(num_outputs)]
    node = helper.make_node(op, names, outs, domain=domain, name=f"{op.lower()}_node", **attrs)
    ins = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(x.dtype), x.shape)
           for n, x in zip(names, inputs) if n and x is not None]
    elem = None if out_dtype is None else helper.np_dtype_to_tensor_dtype(np.dtype(out_dtype))
    vis = [helper.make_value_info(o, onnx.TypeProto()) if elem is None else helper.make_tensor_value_info(o, elem, None)
           for o in outs if o]
    graph = helper.make_graph([node], "g", ins, vis)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset),
                                                   helper.make_opsetid("com.microsoft", 1)])


def feeds_of(model: onnx.ModelProto, inputs: Sequence[np.ndarray | None]) -> dict[str, np.ndarray]:
    return {f"in{i}": x for i, x in enumerate(inputs) if x is not None}


def run_ours(model: onnx.ModelProto, inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
    session = gx.Session(gx.load(model))
    res = session.run(feeds_of(model, inputs)).outputs
    outs = [np.asarray(res[o.name]) for o in model.graph.output]
    check_inferred(model, session.compiled.graph, outs)
    return outs


# outputs whose size is a runtime value (total_sequence_length): their rule leaves that dim unknown
_RUNTIME_DIMS = {("com.microsoft", "GroupQueryAttention"): (1, 2, 3)}


def check_inferred(model: onnx.ModelProto, graph: Any, outs: Sequence[np.ndarray]) -> None:
    """For an op with a rule in contrib_shapes: its outputs were static at compile time, and
    of the very dtype and shape the kernel returned (else memory was planned wrong)."""
    node = model.graph.node[0]
    if (node.domain, node.op_type) not in contrib_shapes.RULES:
        return
    partial = _RUNTIME_DIMS.get((node.domain, node.op_type), ())
    named = [i for i, o in enumerate(node.output) if o]
    for i, out, got in zip(named, model.graph.output, outs):
        t = graph.values[out.name].type
        if i in partial:
            dims = [d if isinstance(d, int) else s for d, s in zip(t.shape or (), got.shape)]
            assert (t.dtype, len(t.shape or ())) == (got.dtype, got.ndim) and tuple(dims) == got.shape, \
                f"{node.op_type} output {i}: inferred {t}, kernel gave {got.dtype}{list(got.shape)}"
            continue
        assert t.is_static and (t.dtype, t.shape) == (got.dtype, got.shape), \
            f"{node.op_type} output {i}: inferred {t}, kernel gave {got.dtype}{list(got.shape)}"


def run_ort(model: onnx.ModelProto, inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.log_severity_level = 3  # ORT warns where its own shape inference disagrees with its kernel
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    return list(sess.run(None, feeds_of(model, inputs)))


def check(op: str, inputs: Sequence[np.ndarray | None], num_outputs: int = 1, rtol: float = 1e-5,
          atol: float = 1e-5, outputs: Sequence[str] | None = None, domain: str = "com.microsoft",
          opset: int = 17, out_dtype: Any = None, **attrs: Any) -> list[np.ndarray]:
    """Assert ours equals onnxruntime's CPU kernel in shape, dtype and values; return ours."""
    model = one_node(op, inputs, num_outputs, domain, outputs, opset, out_dtype, **attrs)
    ours, ref = run_ours(model, inputs), run_ort(model, inputs)
    assert len(ours) == len(ref)
    for i, (o, r) in enumerate(zip(ours, ref)):
        assert o.shape == r.shape, f"{op} output {i}: shape {o.shape} != {r.shape}"
        assert o.dtype == r.dtype, f"{op} output {i}: dtype {o.dtype} != {r.dtype}"
        np.testing.assert_allclose(o.astype(np.float64), r.astype(np.float64), rtol=rtol, atol=atol,
                                   err_msg=f"{op} output {i}")
    return ours


def check_formula(op: str, inputs: Sequence[np.ndarray | None], expected: Sequence[np.ndarray],
                  rtol: float = 1e-5, atol: float = 1e-5, **attrs: Any) -> None:
    """For ops onnxruntime has no CPU kernel for: compare with the documented formula."""
    model = one_node(op, inputs, len(expected), **attrs)
    for o, e in zip(run_ours(model, inputs), expected):
        assert o.shape == e.shape and o.dtype == e.dtype, f"{op}: {o.shape}/{o.dtype} != {e.shape}/{e.dtype}"
        np.testing.assert_allclose(o.astype(np.float64), e.astype(np.float64), rtol=rtol, atol=atol, err_msg=op)
