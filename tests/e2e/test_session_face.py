"""A session's face as onnxruntime users expect it: input/output metadata, ``run`` choosing
outputs, the compiled (lowered, fused) graph saved as ONNX (``plan --save-graph`` too),
and short reprs of a session and a result."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest

import graphexec as gx

ROOT = Path(__file__).resolve().parents[2]
DECODER = str(ROOT / "models" / "tiny_decoder.onnx")
BLOCK = str(ROOT / "models" / "inception_block.onnx")


def test_inputs_and_outputs_like_onnxruntime():
    ort = pytest.importorskip("onnxruntime")
    session = gx.Session(DECODER)
    ref = ort.InferenceSession(DECODER, providers=["CPUExecutionProvider"])
    assert [(i.name, i.type, list(i.shape)) for i in session.get_inputs()] == \
        [(i.name, i.type, list(i.shape)) for i in ref.get_inputs()]
    assert [o.name for o in session.outputs] == [o.name for o in ref.get_outputs()]
    assert session.inputs[0].symbolic == ["sequence"] and session.inputs[0].dtype == "int64"


def test_run_chooses_outputs_in_the_order_asked():
    session = gx.Session(DECODER)
    feeds = gx.default_feeds(session.graph)
    full = session.run(feeds)
    some = session.run(feeds, outputs=["present.1.value", "logits"])
    assert list(some.outputs) == ["present.1.value", "logits"]
    np.testing.assert_array_equal(some.outputs["logits"], full.outputs["logits"])
    with pytest.raises(gx.GraphExecError, match="'nope' is not an output of the graph; outputs are: logits"):
        session.run(feeds, outputs=["nope"])


def test_short_reprs():
    session = gx.Session(BLOCK, streams=2)
    result = session.run(gx.default_feeds(session.graph))
    assert repr(session) == ("Session('" + BLOCK + "', device='ascend910', streams=2, "
                             "inputs=[data: float32[N,192,28,28]], outputs=[out: float32[N,256,28,28]])")
    text = repr(result)
    assert text.startswith("Result(outputs={out: float32[1,256,28,28]}, makespan_us=") and len(text) < 200


def test_the_compiled_graph_saved_as_onnx_shows_fusion_and_streams(tmp_path):
    session = gx.Session(BLOCK, streams=1)
    feeds = gx.default_feeds(session.graph)
    path = session.save_graph(tmp_path / "compiled.onnx", feeds)   # the plan of these shapes
    model = onnx.load(path)
    onnx.checker.check_model(model)
    tasks = [n for n in model.graph.node if n.doc_string.startswith("stream 0,")]
    assert ("Conv+Relu", "graphexec.fused") in [(n.op_type, n.domain) for n in tasks]
    assert len(tasks) == session.run(feeds).stats.num_tasks   # and the Concat written in place, no task:
    assert [n.op_type for n in model.graph.node if n not in tasks] == ["Concat"]
    decoder = gx.Session(DECODER, streams=2)
    model = onnx.load(decoder.save_graph(tmp_path / "decoder.onnx"))
    onnx.checker.check_model(model)   # views that launch no task are there as their ops, marked
    assert any(n.doc_string.startswith("no task: a view") for n in model.graph.node)
    out = tmp_path / "plan.onnx"
    p = subprocess.run([sys.executable, "-m", "graphexec", "plan", BLOCK, "--save-graph", str(out)],
                       capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert p.returncode == 0 and f"compiled graph written to {out}" in p.stdout
    assert onnx.load(out).graph.node[0].domain == "graphexec.fused"
