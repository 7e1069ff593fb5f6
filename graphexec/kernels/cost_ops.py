"""Own cost rules of ops whose work is not the elements they touch: NonMaxSuppression
(pairs of boxes), RoiAlign (samples per output), the ``ai.onnx.ml`` models (nodes visited,
support vectors, coefficients).

Each rule counts operations of the algorithm the kernel runs, from the node's static
shapes and attributes; the device profile's vector rate turns them into time. A rule
returns None where a shape it needs is unknown (the default rule then applies).
"""

from __future__ import annotations

import math
from typing import Any

from graphexec.kernels.cost import MAX_BLOCK_DIM, Cost

# operations in one IoU test (nms): 2 max, 2 min, 2 widths, 1 product, 2 for the union,
# 1 division, 1 comparison; a count of the reference's formula, not a fit
IOU_OPS = 11
# operations per bilinear sample (roi_align): 4 weights from 2 fractions (6), 4 products and 3 sums
SAMPLE_OPS = 13


def _vector(flops: float, moved: float, blocks: int) -> Cost:
    return Cost(float(flops), moved, "vector", max(1, min(int(blocks), MAX_BLOCK_DIM)))


def nms(ins: list, outs: list, moved: float, attrs: dict) -> Cost | None:
    """Greedy NMS per (batch, class): the sort, and at worst every pair of its boxes tested
    once (a candidate against each box kept before it); classes are independent blocks."""
    boxes, scores = (ins + [None, None])[:2]
    if not boxes or not scores or len(boxes) != 3 or len(scores) != 3:
        return None
    b, c, n = scores
    sort = n * max(1, math.ceil(math.log2(max(n, 2))))
    return _vector(b * c * (sort + IOU_OPS * n * (n - 1) / 2), moved, b * c)


def roi_align(ins: list, outs: list, moved: float, attrs: dict) -> Cost | None:
    """Every output cell averages (or maxes) sampling_ratio^2 bilinear samples; with an
    adaptive ratio (0) the count depends on the boxes, and 2x2 is assumed (torchvision's
    detection heads use 2)."""
    out = outs[0] if outs else None
    if not out:
        return None
    ratio = int(attrs.get("sampling_ratio", 0)) or 2
    cells = math.prod(out)
    return _vector(cells * ratio * ratio * (SAMPLE_OPS + 1), moved, out[0])


def per_row(ops_per_row: Any) -> Any:
    """A rule for a model applied to each row of input 0 (``[N, F]``), ``ops_per_row(F, attrs)``
    operations a row; rows are independent blocks."""
    def rule(ins: list, outs: list, moved: float, attrs: dict) -> Cost | None:
        x = ins[0] if ins else None
        if not x:
            return None
        rows = x[0] if len(x) > 1 else 1
        feats = math.prod(x[1:]) if len(x) > 1 else x[0]
        return _vector(rows * max(1.0, float(ops_per_row(feats, attrs))), moved, rows)
    return rule


# operations per tree level of one row (tree ensembles): read the feature, compare, pick the branch
TREE_STEP_OPS = 3


def trees(feats: int, attrs: dict) -> float:
    """A row's walk through every tree (balanced depth from the nodes per tree) and one add
    of each tree's leaf weight."""
    modes = attrs.get("nodes_modes")
    n_nodes = len(modes) if modes is not None else 1
    roots = attrs.get("tree_roots")
    n_trees = len(roots) if roots is not None else len(set(attrs.get("nodes_treeids") or [0]))
    depth = math.log2(n_nodes / max(n_trees, 1) + 1)
    return n_trees * (depth * TREE_STEP_OPS + 1)


# a radix-2 FFT's operations per complex output and level (the usual 5 N log2 N count)
FFT_OPS = 5


def fft(ins: list, outs: list, moved: float, attrs: dict) -> Cost | None:
    """DFT/STFT: FFT_OPS x outputs x log2(transform length), the length taken as the output's
    frequency axis (a one-sided transform's n/2 + 1 bins under-count it by one level)."""
    out = outs[0] if outs else None
    if not out or len(out) < 2:
        return None
    axis = out[-2] if len(out) > 2 else out[0]
    return _vector(FFT_OPS * math.prod(out[:-1]) * max(1.0, math.log2(max(axis, 2))), moved, out[0])
