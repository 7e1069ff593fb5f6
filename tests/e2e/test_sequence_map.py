"""SequenceMap is lowered at load to the Loop of its ONNX function body
(frontend/sequence_map.py), so its body runs as device tasks once per element and its
simulated time grows with the sequence's length, where the whole map ran as one reference
task; results equal onnxruntime's at 1 and 4 streams."""

from __future__ import annotations

import base64

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

import graphexec as gx
from graphexec.frontend.yaml import loads_yaml

ort = pytest.importorskip("onnxruntime")


def _model() -> onnx.ModelProto:
    """ys[i] = xs[i] * w + 1 and zs[i] = shape(xs[i]), for a sequence xs and a tensor w."""
    body = h.make_graph(
        [h.make_node("Mul", ["x", "wt"], ["xw"]), h.make_node("Add", ["xw", "one"], ["y"]),
         h.make_node("Shape", ["x"], ["z"])], "body",
        [h.make_tensor_value_info("x", T.FLOAT, None), h.make_tensor_value_info("wt", T.FLOAT, None)],
        [h.make_tensor_value_info("y", T.FLOAT, None), h.make_tensor_value_info("z", T.INT64, None)],
        [onnx.numpy_helper.from_array(np.array(1, np.float32), "one")])
    g = h.make_graph([h.make_node("SequenceMap", ["xs", "w"], ["ys", "zs"], name="map", body=body)], "g",
                     [h.make_tensor_sequence_value_info("xs", T.FLOAT, None),
                      h.make_tensor_value_info("w", T.FLOAT, [4])],
                     [h.make_tensor_sequence_value_info("ys", T.FLOAT, None),
                      h.make_tensor_sequence_value_info("zs", T.INT64, None)])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 18)])


def _feeds(n: int) -> dict:
    rng = np.random.default_rng(n)
    return {"xs": [rng.standard_normal((k + 1, 4)).astype(np.float32) for k in range(n)],
            "w": rng.standard_normal(4).astype(np.float32)}


def _run(n: int, streams: int = 1) -> gx.Result:
    return gx.Session(gx.load(_model()), streams=streams).run(_feeds(n))


@pytest.mark.parametrize("streams", [1, 4])
def test_sequence_map_equals_onnxruntime_and_runs_its_body_as_tasks(streams):
    feeds = _feeds(5)
    want = ort.InferenceSession(_model().SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    result = _run(5, streams)
    for name, ref in zip(("ys", "zs"), want):
        got = result.outputs[name]
        assert len(got) == len(ref) == 5
        for a, b in zip(got, ref):
            np.testing.assert_allclose(a, b, rtol=1e-6)
    ops = [e.get("args", {}).get("op") for e in result.trace["traceEvents"] if e.get("cat") in ("kernel", "aicpu")]
    assert ops.count("Mul") == ops.count("Shape") == 5   # the body's tasks, once per element
    assert "SequenceMap" not in ops


def test_sequence_map_time_is_linear_in_the_sequence_length():
    t = {n: _run(n).stats.makespan_us for n in (3, 6, 12)}
    assert t[3] < t[6] < t[12]
    assert t[12] - t[6] == pytest.approx(2 * (t[6] - t[3]), rel=1e-9)


def test_a_map_whose_input_kind_cannot_be_told_stays_as_it_was():
    m = _model()
    del m.graph.input[0].type.sequence_type.elem_type.tensor_type.shape.dim[:]
    m.graph.input[0].type.Clear()           # untyped: neither declared nor inferable
    from graphexec.frontend.sequence_map import lower_sequence_maps

    lower_sequence_maps(m)
    assert [n.op_type for n in m.graph.node] == ["SequenceMap"]


def _yaml() -> str:
    """The same map as a YAML graph: xs a declared sequence, the body a base64 GraphProto."""
    body = next(a.g for a in _model().graph.node[0].attribute if a.name == "body")
    return f"""version: 1
name: seqmap
opset: 18
inputs: [xs, w]
outputs: [ys, zs]
tensors:
  xs: {{kind: sequence, type: 'seq(tensor(float))'}}
  w: {{dtype: float32, shape: [4]}}
nodes:
  - name: map
    op: SequenceMap
    inputs: [xs, w]
    outputs: [ys, zs]
    attributes: {{body: {{graph: {base64.b64encode(body.SerializeToString()).decode()}}}}}
"""


def test_a_yaml_sequence_map_is_lowered_too():
    graph = loads_yaml(_yaml(), "seqmap.yaml")
    assert "SequenceMap" not in [n.op for n in graph.nodes] and "Loop" in [n.op for n in graph.nodes]
    yaml_run, onnx_run = gx.Session(graph).run(_feeds(4)), _run(4)
    assert yaml_run.stats.makespan_us == onnx_run.stats.makespan_us
    for a, b in zip(yaml_run.outputs["ys"], onnx_run.outputs["ys"]):
        np.testing.assert_array_equal(a, b)
