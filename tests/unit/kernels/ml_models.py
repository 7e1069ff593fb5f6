"""Small ``ai.onnx.ml`` models built with onnx.helper (no exporter needed), for test_ml.py."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper

ML = "ai.onnx.ml"


def one_node(op: str, outputs: int, feats: int, x_type: int = TensorProto.FLOAT, **attrs: Any) -> onnx.ModelProto:
    """A model of one ``ai.onnx.ml`` node on X [N, feats]."""
    names = [f"y{i}" for i in range(outputs)]
    node = helper.make_node(op, ["x"], names, domain=ML, **attrs)
    graph = helper.make_graph([node], op, [helper.make_tensor_value_info("x", x_type, [None, feats])],
                              [onnx.ValueInfoProto(name=n) for n in names])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(ML, 3)])


def random_trees(rng: np.random.Generator, trees: int, depth: int, feats: int, targets: int, prefix: str,
                 modes: tuple[str, ...] = ("BRANCH_LEQ",)) -> dict[str, Any]:
    """Legacy TreeEnsemble* attributes: ``trees`` random trees of ``depth`` levels, tree ids
    out of order and node ids not equal to positions, leaf weights for random targets."""
    a: dict[str, list] = {k: [] for k in ("nodes_treeids", "nodes_nodeids", "nodes_featureids", "nodes_values",
                                           "nodes_modes", "nodes_truenodeids", "nodes_falsenodeids",
                                           "nodes_missing_value_tracks_true", f"{prefix}_treeids",
                                           f"{prefix}_nodeids", f"{prefix}_ids", f"{prefix}_weights")}
    for tree in rng.permutation(trees):
        n_nodes = 2 ** (depth + 1) - 1
        for i in range(n_nodes):
            leaf = i >= 2 ** depth - 1
            a["nodes_treeids"].append(int(tree))
            a["nodes_nodeids"].append(3 * i)
            a["nodes_featureids"].append(0 if leaf else int(rng.integers(feats)))
            a["nodes_values"].append(0.0 if leaf else float(np.float32(rng.normal())))
            a["nodes_modes"].append("LEAF" if leaf else str(rng.choice(modes)))
            a["nodes_truenodeids"].append(0 if leaf else 3 * (2 * i + 1))
            a["nodes_falsenodeids"].append(0 if leaf else 3 * (2 * i + 2))
            a["nodes_missing_value_tracks_true"].append(int(rng.integers(2)))
            if leaf:
                for t in rng.permutation(targets):   # every target (onnxruntime leaves a target no leaf names at 0)
                    a[f"{prefix}_treeids"].append(int(tree))
                    a[f"{prefix}_nodeids"].append(3 * i)
                    a[f"{prefix}_ids"].append(int(t))
                    a[f"{prefix}_weights"].append(float(np.float32(rng.normal())))
    return a
