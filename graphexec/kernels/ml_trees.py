"""Tree ensembles (``ai.onnx.ml`` TreeEnsembleRegressor/Classifier and TreeEnsemble-5), vectorized.

onnx.reference walks each row down each tree in Python; here every (row, tree) pair walks at
once, one array step per level, with the nodes in flat arrays (``Forest``) built once per node
from its attributes and kept in its context's cache. Leaves point to themselves, so a pair
that has reached its leaf stays there; the pairs still walking are compacted as they thin out.
Scores are summed tree by tree in the reference's order and dtype, so sums round as its do.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from graphexec.kernels import cost_ops
from graphexec.kernels.ml_common import ML, POST, as_rows, labels_of, post_transform
from graphexec.kernels.registry import OpContext, Unsupported, register

LEAF, LEQ, LT, GTE, GT, EQ, NEQ, MEMBER = range(8)
_MODES = {"LEAF": LEAF, "BRANCH_LEQ": LEQ, "BRANCH_LT": LT, "BRANCH_GTE": GTE, "BRANCH_GT": GT,
          "BRANCH_EQ": EQ, "BRANCH_NEQ": NEQ}
_TESTS = {LEQ: np.less_equal, LT: np.less, GTE: np.greater_equal, GT: np.greater, EQ: np.equal,
          NEQ: np.not_equal}
PAIRS = 1 << 15       # (row, tree) pairs walked together: their index arrays stay in cache
MAX_DENSE = 1 << 25   # leaf-weight table cells ([nodes, targets]) kept dense; larger goes to the reference


@dataclass(frozen=True, eq=False)
class Forest:
    """Flat nodes: feature, threshold, mode, true/false successor and the missing-value
    branch per node (a leaf's successors are itself), the roots in tree order, and the
    members of each set-membership node."""

    feature: np.ndarray
    value: np.ndarray
    mode: np.ndarray
    true: np.ndarray
    false: np.ndarray
    missing: np.ndarray
    roots: np.ndarray
    members: dict[int, np.ndarray] = field(default_factory=dict)
    nan_or: bool = False   # TreeEnsemble-5: a NaN takes the test's branch or the missing one's; else the missing one
    starts: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)

    @cached_property
    def kids(self) -> np.ndarray:
        """[2 * nodes]: node i's false successor at 2i, its true one at 2i + 1 (one gather a step)."""
        return np.stack([self.false, self.true], axis=1).reshape(-1)

    @cached_property
    def depth(self) -> int:
        """The most steps from a root to its leaf (a cycle is refused)."""
        level, depth = np.unique(self.roots), 0
        while True:
            level = np.unique(np.concatenate([self.true[level], self.false[level]])[
                np.tile(self.mode[level] != LEAF, 2)])
            if not len(level):
                return depth
            depth += 1
            if depth > len(self.mode):
                raise Unsupported("tree ensemble: a tree has a cycle")

    def leaves(self, x: np.ndarray) -> np.ndarray:
        """[rows, trees] leaf index of every row in every tree, in blocks of rows whose
        (row, tree) pairs fit in cache (PAIRS)."""
        rows = max(1, PAIRS // max(len(self.roots), 1))
        if len(x) <= rows:
            return self._walk(x)
        return np.concatenate([self._walk(x[i:i + rows]) for i in range(0, len(x), rows)])

    def _walk(self, x: np.ndarray) -> np.ndarray:
        """Each step moves every pair still walking one level down; every 4 steps, once the
        pairs at their leaves are half of them, those are written out and the rest walk on."""
        n, t = len(x), len(self.roots)
        node, base = self._start(n, x.shape[1])
        out, origin = np.empty(n * t, dtype=np.int64), None   # origin: where each walking pair's leaf goes
        flat, nan = x.reshape(-1), bool(np.isnan(x).any()) if x.dtype.kind == "f" else False
        modes, kids = self.modes, self.kids
        for step in range(self.depth):
            v = flat[base + self.feature[node]]
            go = self._test(modes, node, v)
            if nan:
                isnan = np.isnan(v)
                go = (go | (isnan & self.missing[node])) if self.nan_or else np.where(isnan, self.missing[node], go)
            node = node * 2
            node += go
            node = kids[node]
            if step % 4 == 3:
                walking = self.mode[node] != LEAF
                if np.count_nonzero(walking) * 2 < len(node):
                    done = ~walking
                    out[np.flatnonzero(done) if origin is None else origin[done]] = node[done]
                    origin = np.flatnonzero(walking) if origin is None else origin[walking]
                    node, base = node[walking], base[walking]
        if origin is None:
            return node.reshape(n, t)
        out[origin] = node
        return out.reshape(n, t)

    def _start(self, n: int, feats: int) -> tuple[np.ndarray, np.ndarray]:
        """Every pair at its tree's root, and each pair's row offset into X (kept per shape:
        a model sees the same batch size run after run)."""
        key = (n, feats)
        if key not in self.starts:
            t = len(self.roots)
            self.starts[key] = (np.tile(self.roots, n), np.repeat(np.arange(n, dtype=np.int64) * feats, t))
        return self.starts[key]

    @cached_property
    def modes(self) -> np.ndarray:
        return np.unique(self.mode[self.mode != LEAF])

    def _test(self, modes: np.ndarray, cur: np.ndarray, v: np.ndarray) -> np.ndarray:
        """Whether each walking pair takes its node's true branch (NaN aside)."""
        if len(modes) == 1 and modes[0] in _TESTS:
            return _TESTS[int(modes[0])](v, self.value[cur])
        mode = self.mode[cur]
        go = np.zeros(len(cur), dtype=bool)
        for m in modes:
            sel = mode == m
            if m == MEMBER:
                for node in np.unique(cur[sel]):
                    here = cur == node
                    go[here] = np.isin(v[here], self.members[int(node)])
            else:
                go[sel] = _TESTS[int(m)](v[sel], self.value[cur[sel]])
        return go


def _legacy_forest(ctx: OpContext) -> tuple[Forest, dict[tuple[int, int], int]]:
    """A TreeEnsembleRegressor/Classifier's nodes and their index by (tree id, node id);
    thresholds float32 as the reference keeps them."""
    a = ctx.attrs
    if a.get("nodes_values") is None or a.get("nodes_values_as_tensor") is not None:
        raise Unsupported(f"{ctx.op}: thresholds given as a tensor")
    tids, nids = a["nodes_treeids"], a["nodes_nodeids"]
    index = {(t, n): i for i, (t, n) in enumerate(zip(tids, nids))}
    roots: dict[int, int] = {}
    for i, t in enumerate(tids):
        roots.setdefault(t, i)
    mode = np.array([_MODES.get(m, -1) for m in a["nodes_modes"]], dtype=np.int8)
    if (mode < 0).any():
        raise Unsupported(f"{ctx.op}: node mode outside {sorted(_MODES)}")
    own = np.arange(len(tids))
    try:
        true = np.array([i if m == LEAF else index[t, n] for i, (m, t, n) in
                         enumerate(zip(mode, tids, a["nodes_truenodeids"]))], dtype=np.int64)
        false = np.array([i if m == LEAF else index[t, n] for i, (m, t, n) in
                          enumerate(zip(mode, tids, a["nodes_falsenodeids"]))], dtype=np.int64)
    except KeyError as e:
        raise Unsupported(f"{ctx.op}: a branch to a missing node {e}") from None
    missing = np.asarray(a.get("nodes_missing_value_tracks_true") or np.zeros(len(own)), dtype=np.int64) >= 1
    forest = Forest(np.asarray(a["nodes_featureids"], dtype=np.int64), np.asarray(a["nodes_values"], dtype=np.float32),
                    mode, true, false, missing, np.array([roots[t] for t in sorted(roots)], dtype=np.int64))
    return forest, index


def _leaf_table(ctx: OpContext, prefix: str, index: dict, n_nodes: int, k: int, fill: float,
                dtype: Any) -> np.ndarray:
    """[nodes, targets] weight of each leaf per target (``fill`` where a leaf has none)."""
    a = ctx.attrs
    if a.get(f"{prefix}_weights") is None:
        raise Unsupported(f"{ctx.op}: weights given as a tensor")
    if n_nodes * k > MAX_DENSE:
        raise Unsupported(f"{ctx.op}: {n_nodes} nodes x {k} targets")
    table = np.full((n_nodes, k), fill, dtype=dtype)
    seen = np.zeros((n_nodes, k), dtype=bool)
    for t, n, c, w in zip(a[f"{prefix}_treeids"], a[f"{prefix}_nodeids"], a[f"{prefix}_ids"], a[f"{prefix}_weights"]):
        i = index.get((t, n))
        if i is None or not 0 <= c < k:
            raise Unsupported(f"{ctx.op}: a weight for node ({t}, {n}) or target {c} that does not exist")
        if seen[i, c] and fill != 0:
            raise Unsupported(f"{ctx.op}: two weights for one target of leaf ({t}, {n}) under MIN/MAX")
        table[i, c] = table[i, c] + dtype(w) if seen[i, c] else dtype(w)
        seen[i, c] = True
    return table


def _cached(ctx: OpContext, key: str | tuple[str, ...], build: Any) -> Any:
    if key not in ctx.cache:
        ctx.cache[key] = build()
    return ctx.cache[key]


def _sum_trees(res: np.ndarray, table: np.ndarray, leaves: np.ndarray, how: str) -> None:
    """Each tree's leaf weights into ``res``, tree after tree (the reference's order)."""
    for column in np.ascontiguousarray(leaves.T):
        w = table[column]
        if how in ("SUM", "AVERAGE"):
            res += w
        elif how == "MIN":
            np.minimum(res, w, out=res)
        else:
            np.maximum(res, w, out=res)


@register("TreeEnsembleRegressor", domain=ML, cost=cost_ops.per_row(cost_ops.trees))
def tree_ensemble_regressor(ctx: OpContext, x: np.ndarray) -> np.ndarray:
    how, post = ctx.attr("aggregate_function", "SUM"), ctx.attr("post_transform", "NONE")
    if x.dtype not in (np.float32, np.float64) or how not in ("SUM", "AVERAGE", "MIN", "MAX") or post not in POST:
        raise Unsupported(f"TreeEnsembleRegressor: {x.dtype}, {how}, post_transform {post}")
    x = as_rows(ctx.op, x, None)
    k = int(ctx.attr("n_targets"))
    forest, index = _cached(ctx, "forest", lambda: _legacy_forest(ctx))
    big = {"MIN": np.finfo(x.dtype).max, "MAX": np.finfo(x.dtype).min}.get(how, 0)
    table = _cached(ctx, ("table", x.dtype.str), lambda: _leaf_table(ctx, "target", index, len(forest.mode), k,
                                                                     big, x.dtype.type))
    res = np.full((len(x), k), big, dtype=x.dtype)
    _sum_trees(res, table, forest.leaves(x), how)
    if how == "AVERAGE":
        res /= len(forest.roots)
    base = ctx.attr("base_values", None)
    if base is not None:
        res += np.array(base, dtype=np.float32).reshape(1, -1)   # float attributes are float32 in the reference
    return regression_transform(post, res)


def regression_transform(post: str, res: np.ndarray) -> np.ndarray:
    """A regressor's post_transform as onnxruntime applies it (the reference has none): on
    two targets or more, each transform of ``ml_common.POST``; on one, PROBIT only (a single
    score is not a distribution; onnxruntime's ``write_scores`` leaves it as it is)."""
    if post == "NONE" or (res.shape[1] == 1 and post != "PROBIT"):
        return res
    return POST[post](res).astype(res.dtype, copy=False)


@register("TreeEnsembleClassifier", domain=ML, cost=cost_ops.per_row(cost_ops.trees))
def tree_ensemble_classifier(ctx: OpContext, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    classes = ctx.attr("classlabels_int64s", None) or ctx.attr("classlabels_strings", None)
    if not classes or len(classes) < 2 and (ctx.attrs.get("classlabels_int64s") or [0])[0] != 1:
        raise Unsupported("TreeEnsembleClassifier: fewer than two classes")
    x = as_rows(ctx.op, x, None if x.dtype in (np.float32, np.float64) else np.float32)
    forest, index = _cached(ctx, "forest", lambda: _legacy_forest(ctx))
    ids = ctx.attr("class_ids")
    table = _cached(ctx, "table", lambda: _leaf_table(ctx, "class", index, len(forest.mode), len(classes), 0,
                                                      np.float32))
    res = np.zeros((len(x), len(classes)), dtype=np.float32)
    base = ctx.attr("base_values", None)
    if base is not None:
        res[:, :] = np.array(base, dtype=np.float32).reshape(1, -1)
    _sum_trees(res, table, forest.leaves(x), "SUM")
    if len(set(ids)) == 1:   # binary: one score, the other class's derived from it
        if res.shape[1] == 1:
            res = np.concatenate([np.zeros_like(res), res], axis=1)
        else:
            res[:, 1] = res[:, 0]
        res[:, 0] = 1 - res[:, 1] if ctx.attr("post_transform", "NONE") in ("NONE", "PROBIT") else -res[:, 1]
    scores = post_transform(ctx, res)
    best = np.argmax(scores, axis=1)
    if len(classes) == 1:   # the reference's one-class case: label 1 for index 1, else 0
        return (best == 1).astype(np.int64), scores
    return labels_of(classes, best), scores


def _v5_forest(ctx: OpContext) -> tuple[Forest, np.ndarray, np.ndarray]:
    """TreeEnsemble-5's nodes then its leaves in one index space; (forest, leaf target, leaf weight)."""
    a = ctx.attrs
    modes = np.asarray(a["nodes_modes"]).astype(np.int64) + 1   # LEQ=0 ... MEMBER=6 there
    n, feats = len(modes), np.asarray(a["nodes_featureids"], dtype=np.int64)
    if ((modes < LEQ) | (modes > MEMBER)).any():
        raise Unsupported("TreeEnsemble: a node mode outside 0..6")

    def succ(ids: str, leafs: str) -> np.ndarray:
        return np.asarray(a[ids], dtype=np.int64) + n * (np.asarray(a[leafs], dtype=np.int64) != 0)

    true, false = succ("nodes_truenodeids", "nodes_trueleafs"), succ("nodes_falsenodeids", "nodes_falseleafs")
    targets, weights = np.asarray(a["leaf_targetids"], dtype=np.int64), np.asarray(a["leaf_weights"])
    n_leaf = len(targets)
    own = np.arange(n, n + n_leaf)
    missing = np.asarray(a.get("nodes_missing_value_tracks_true") or np.zeros(n), dtype=np.int64) != 0
    splits = np.asarray(a["nodes_splits"])
    roots = [true[r] if (a["nodes_trueleafs"][r] and a["nodes_falseleafs"][r]
                                  and true[r] == false[r]) else r for r in a["tree_roots"]]
    members = _members(a, modes)
    forest = Forest(np.concatenate([feats, np.zeros(n_leaf, np.int64)]), np.concatenate([splits, np.zeros(n_leaf,
                    splits.dtype)]), np.concatenate([modes, np.zeros(n_leaf, np.int64)]).astype(np.int8),
                    np.concatenate([true, own]), np.concatenate([false, own]),
                    np.concatenate([missing, np.zeros(n_leaf, bool)]), np.asarray(roots, dtype=np.int64), members,
                    nan_or=True)
    return forest, targets, weights


def _members(a: dict, modes: np.ndarray) -> dict[int, np.ndarray]:
    """Each set-membership node's members: ``membership_values`` split at its NaNs, in node order."""
    at = np.flatnonzero(modes == MEMBER)
    if not len(at):
        return {}
    values = np.asarray(a.get("membership_values") if a.get("membership_values") is not None else [], np.float64)
    groups = np.split(values, np.flatnonzero(np.isnan(values)))
    sets = [g[~np.isnan(g)] for g in groups]
    if len(sets) < len(at):
        raise Unsupported("TreeEnsemble: fewer member sets than set-membership nodes")
    return {int(i): s for i, s in zip(at, sets)}


@register("TreeEnsemble", domain=ML, since=5, cost=cost_ops.per_row(cost_ops.trees))
def tree_ensemble(ctx: OpContext, x: np.ndarray) -> np.ndarray:
    how = int(ctx.attr("aggregate_function", 1))
    post = int(ctx.attr("post_transform", 0))
    if x.dtype.kind != "f" or how not in (0, 1, 2, 3) or not 0 <= post < len(_V5_POST):
        raise Unsupported(f"TreeEnsemble: {x.dtype}, aggregate {how}, post_transform {post}")
    x = as_rows(ctx.op, x, None)
    forest, targets, weights = _cached(ctx, "forest", lambda: _v5_forest(ctx))
    k = int(ctx.attr("n_targets"))
    if len(targets) and not ((targets >= 0) & (targets < k)).all():
        raise Unsupported("TreeEnsemble: a leaf target outside n_targets")
    leaves = forest.leaves(x) - (len(forest.mode) - len(targets))
    fill = {2: np.finfo(x.dtype).max, 3: np.finfo(x.dtype).min}.get(how, 0)
    res = np.full((len(x), k), fill, dtype=x.dtype)
    rows = np.arange(len(x))
    for t in range(leaves.shape[1]):
        tid, w = targets[leaves[:, t]], weights[leaves[:, t]].astype(np.float64)
        if how == 1:
            res[rows, tid] += w
        elif how == 0:
            res[rows, tid] += w / leaves.shape[1]
        else:
            res[rows, tid] = (np.minimum if how == 2 else np.maximum)(res[rows, tid], w)
    return regression_transform(_V5_POST[post], res)


_V5_POST = ("NONE", "SOFTMAX", "LOGISTIC", "SOFTMAX_ZERO", "PROBIT")   # TreeEnsemble-5's post_transform enum
