"""A YAML graph's ``onnx_functions`` are inlined at load as an ONNX file's are
(frontend/yaml_functions.py): nested calls, attribute references and a body in another opset
run as device tasks, the same tasks and numbers as the ONNX model with the same functions,
where the calls went to the reference, which knew none of the functions."""

from __future__ import annotations

import base64

import numpy as np
import onnx
import pytest
from onnx import helper as h
from unit.frontend.test_onnx_functions import _model, _ort, _scale, _twice

import graphexec as gx
from graphexec import cli
from graphexec.frontend.yaml import loads_yaml


def _b64(f: onnx.FunctionProto) -> str:
    return base64.b64encode(f.SerializeToString()).decode()


def _yaml(functions: list[onnx.FunctionProto], label: str = "") -> str:
    extra = f", stream_label: {label}" if label else ""
    return f"""version: 1
name: funcs
opset: 18
opsets: {{my.dom: 1, other: 1}}
inputs: [x]
outputs: [z]
tensors:
  x: {{dtype: float32, shape: [3, 4]}}
onnx_functions: [{', '.join(_b64(f) for f in functions)}]
nodes:
  - {{name: first, op: Twice, domain: other, inputs: [x], outputs: [y]{extra}}}
  - {{name: second, op: Twice, domain: other, inputs: [y], outputs: [z]}}
"""


@pytest.mark.parametrize("opset", [18, 13])   # 13: the bodies are converted to the graph's 18
@pytest.mark.parametrize("streams", [1, 4])
def test_yaml_functions_run_as_the_onnx_model_with_them(opset, streams):
    fns = [_twice(opset), _scale(opset)]
    graph = loads_yaml(_yaml(fns), "funcs.yaml")
    assert not graph.functions and {n.domain for n in graph.nodes} == {""}
    m = _model([h.make_node("Twice", ["x"], ["y"], domain="other"), h.make_node("Twice", ["y"], ["z"], domain="other")],
               fns)
    x = np.random.default_rng(3).standard_normal((3, 4)).astype(np.float32)
    ours = gx.Session(graph, streams=streams).run({"x": x})
    onnx_run = gx.Session(gx.load(m), streams=streams).run({"x": x})
    assert ours.stats.num_tasks == onnx_run.stats.num_tasks
    assert ours.stats.makespan_us == onnx_run.stats.makespan_us
    np.testing.assert_allclose(ours.outputs["z"], _ort(m, {"x": x})[0], rtol=1e-6)


def test_a_call_keeps_its_stream_label_on_every_node_it_expands_to():
    graph = loads_yaml(_yaml([_twice(18), _scale(18)], label="side"), "funcs.yaml")
    labels = {n.name: n.meta.get("stream_label") for n in graph.nodes}
    assert {v for k, v in labels.items() if k.startswith("first__")} == {"side"}
    assert {v for k, v in labels.items() if k.startswith("second__")} == {None}


def test_a_cycle_is_one_line_at_the_calling_node(tmp_path, capsys):
    a = h.make_function("other", "Twice", ["x"], ["y"], [h.make_node("Twice", ["x"], ["y"], domain="other")],
                        [h.make_opsetid("", 18), h.make_opsetid("other", 1)])
    path = tmp_path / "cycle.yaml"
    path.write_text(_yaml([a]))
    rc = cli.main(["validate", str(path)])
    out, err = capsys.readouterr()
    assert rc == 2, err
    assert "call themselves: other::Twice -> other::Twice" in err + out
    assert "Traceback" not in err
