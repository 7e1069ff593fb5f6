"""Lowering's costs, shared between nodes alike, against each node's own ``node_cost`` and
compute dtype: light ONNX models (many ops, attributes, dtypes), random DAGs and a long
graph of few node kinds."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from dags import random_dag

import graphexec as gx
from graphexec.engine.feeds import default_feeds
from graphexec.kernels.cost import node_cost
from graphexec.kernels.fused import fused_cost, is_fused, value_shapes
from graphexec.passes import lowering

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
from compile_scale import layered  # noqa: E402

LIGHT = sorted((Path(onnx.__file__).parent / "backend" / "test" / "data" / "light").glob("*.onnx"))
SOME = [p for p in LIGHT if p.stem in ("light_bvlc_alexnet", "light_inception_v1", "light_shufflenet", "light_resnet50")]


def _check(compiled):
    graph = compiled.graph
    tasks, runners = lowering.lower(graph)   # the lowering's own runners (host fusion replaces some)
    assert [t.id for t in tasks.tasks] == [t.id for t in compiled.tasks.tasks]
    for t in tasks.tasks:
        node, runner = t.node, runners[t.id]
        outs = [o for o in node.outputs if o]
        if is_fused(node):   # graph fusion's task: the fused kernel's cost, its head's dtype
            cost = fused_cost(graph, node)
            assert (t.unit, t.flops, t.bytes, t.block_dim) == (cost.unit, cost.flops, cost.bytes, cost.block_dim)
            continue
        ins, in_b = value_shapes(graph, node.inputs)
        o_s, out_b = value_shapes(graph, outs)
        cost = node_cost(node.op, ins, in_b, o_s, out_b, node.attrs, runner.uses_fallback, node.domain)
        assert (t.unit, t.flops, t.bytes, t.block_dim) == (cost.unit, cost.flops, cost.bytes, cost.block_dim)
        assert t.dtype == lowering._compute_dtype(graph, node, outs, cost.unit)


@pytest.mark.parametrize("path", SOME, ids=[p.stem[6:] for p in SOME])
def test_costs_of_light_models_are_each_nodes_own(path):
    graph = gx.load(path)
    _check(gx.Session(graph).compile(default_feeds(graph)))


@pytest.mark.parametrize("seed", range(6))
def test_costs_of_random_dags_are_each_nodes_own(seed):
    _check(gx.Session(random_dag(np.random.default_rng(seed), 70)).compile(None))


def test_costs_of_a_long_graph_of_few_kinds_are_each_nodes_own():
    _check(gx.Session(gx.load(layered(400)), streams=4).compile({"x": np.ones((8, 8), np.float32)}))
