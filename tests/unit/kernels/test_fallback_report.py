"""Which ops ran through onnx.reference, and their host time: the run summary's line and
op_summary's Host Kernel column."""

from __future__ import annotations

import csv

import numpy as np
from onnx import TensorProto, helper

import graphexec as gx
from graphexec.cli.fallbacks import fallback_line, plan_runners
from graphexec.kernels.dispatch import fallback_uses


def _model():
    """Det (no own kernel: the reference computes it) between two own kernels."""
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Det", ["r"], ["d"]),
             helper.make_node("Neg", ["d"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_fallback_uses_name_the_op_and_count_its_calls_and_time():
    session = gx.Session(gx.load(_model()))
    x = np.random.default_rng(0).standard_normal((2, 3, 3)).astype(np.float32)
    for _ in range(3):
        session.run({"x": x})
    uses = fallback_uses(plan_runners(session.compiled.plan))
    assert [(u.op, u.domain, u.nodes, u.calls) for u in uses] == [("Det", "", 1, 3)]
    assert uses[0].seconds > 0
    line = fallback_line(uses)
    assert line is not None and "Det 1 node" in line and "1 op type," in line


def test_no_line_when_every_op_has_an_own_kernel():
    assert fallback_line([]) is None


def test_cli_run_prints_the_fallback_line_and_op_summary_flags_the_task(tmp_path, capsys):
    from graphexec.cli.app import main

    path = tmp_path / "det.onnx"
    path.write_bytes(_model().SerializeToString())
    assert main(["run", str(path), "--profile", str(tmp_path / "prof")]) == 0
    assert "reference fallback (onnx.reference, no own kernel): 1 op type" in capsys.readouterr().out
    with open(tmp_path / "prof" / "op_summary.csv", newline="") as f:
        rows = {r["OP Type"]: r["Host Kernel"] for r in csv.DictReader(f)}
    assert rows == {"Relu": "own", "Det": "reference", "Neg": "own"}


def test_fallbacks_inside_an_if_body_are_counted():
    """A body plan compiled for a signature only the run shows is counted too."""
    from graphexec.cli.fallbacks import compiled_runners

    det = helper.make_graph([helper.make_node("Det", ["r"], ["d"])], "then", [],
                            [helper.make_tensor_value_info("d", TensorProto.FLOAT, None)])
    neg = helper.make_graph([helper.make_node("ReduceSum", ["r"], ["d"], keepdims=0,
                                              noop_with_empty_axes=0)], "else", [],
                            [helper.make_tensor_value_info("d", TensorProto.FLOAT, None)])
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("If", ["c"], ["y"], then_branch=det,
                                                                      else_branch=neg)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 3]),
                                           helper.make_tensor_value_info("c", TensorProto.BOOL, [])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    session = gx.Session(gx.load(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])))
    session.run({"x": np.eye(3, dtype=np.float32) * 2, "c": np.array(True)})
    uses = fallback_uses(compiled_runners(session.compiled))
    assert [(u.op, u.calls) for u in uses] == [("Det", 1)]
