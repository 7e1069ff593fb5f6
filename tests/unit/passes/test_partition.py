"""One entry spreads a graph over cards (``passes/partition.py``); the multi-card modes
call it and run no pass by hand."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import graphexec as gx
from graphexec.engine.compiled import compile
from graphexec.ir.clone import clone_graph
from graphexec.passes.partition import partition
from graphexec.plan import CompileOptions
from graphexec.runtime.profiles import load_profile
from graphexec.runtime.systems import load_system

ROOT = Path(__file__).resolve().parents[3]
# what a mode may take from passes/: the entry, the records it returns, and cost helpers
ALLOWED = {"graphexec.passes.partition", "graphexec.passes.pipeline_cut", "graphexec.passes.tensor_split",
           "graphexec.passes.free_batch", "graphexec.passes.fusion_groups", "graphexec.passes.makespan_bounds"}
PARTITIONERS = {"cut", "stage_graph", "split_graph", "segments", "fold_constants", "infer_types"}


def _mlp(batch: int = 8, d: int = 64) -> gx.Graph:
    rng = np.random.default_rng(0)
    inits = {"w1": rng.standard_normal((d, 4 * d)).astype(np.float32),
             "w2": rng.standard_normal((4 * d, d)).astype(np.float32)}
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"], name="mm1"), helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("MatMul", ["r", "w2"], ["y"], name="mm2")]
    g = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, d])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, d])],
                          [numpy_helper.from_array(v, k) for k, v in inits.items()])
    return gx.load(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))


def test_a_pipeline_partition_gives_each_card_one_stage_and_its_input_types():
    g = _mlp()
    types = {"x": g.values["x"].type}
    profile = load_profile("ascend910")
    whole = compile(clone_graph(g), CompileOptions(input_types=types), profile)
    system = load_system("atlas800-910")
    part = partition(g, "pipeline", 2, types, costs=whole, links=[system.link(0, 1), system.link(0, 1)])
    assert part.kind == "pipeline" and len(part.cards) == len(part.stages) == 2
    for (p,), st in zip(part.cards, part.stages):
        assert set(p.input_types) == set(p.graph.inputs) and all(t.is_static for t in p.input_types.values())
        assert len(p.graph.nodes) == len(st.nodes)


def test_a_tensor_partition_splits_the_pair_and_asks_worth_with_the_typed_graph():
    g = _mlp()
    asked = []
    part = partition(g, "tensor", 2, {"x": g.values["x"].type}, worth=lambda typed: asked.append(typed) or None)
    assert len(asked) == 1 and asked[0] is not g and asked[0].values["h"].type.shape == (8, 256)
    assert [c.kind for c in part.collectives] == ["all_reduce"] and part.report["segments"] == len(part.segments)
    assert len(part.cards) == 2 and all(len(parts) == len(part.segments) for parts in part.cards)
    w1 = [v.const.shape for parts in part.cards for p in parts for k, v in p.graph.values.items()
          if k.startswith("w1") and v.const is not None]
    assert w1 == [(64, 128), (64, 128)]   # each card its column shard


def test_bad_partition_requests_are_one_line_errors():
    g = _mlp()
    with pytest.raises(gx.GraphExecError, match="partition kind must be one of pipeline, tensor"):
        partition(g, "data", 2, {})
    with pytest.raises(gx.GraphExecError, match="needs a one-device plan"):
        partition(g, "pipeline", 2, {})


def test_the_cluster_modes_run_no_partitioner_or_pass_by_hand():
    for path in sorted((ROOT / "graphexec" / "cluster").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("graphexec.passes"):
                assert node.module in ALLOWED, f"{path.name} imports {node.module}"
                names = {a.name for a in node.names}
                assert not names & PARTITIONERS, f"{path.name} imports {sorted(names & PARTITIONERS)}"
