"""The ``ai.onnx.ml`` kernels against onnx.reference and onnxruntime: models built with
onnx.helper (everywhere), the ONNX node tests, and exporter-written models (skipped where
scikit-learn and skl2onnx are not installed)."""

from __future__ import annotations

import warnings

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from kernel_oracle import node_cases_without_fallback
from ml_models import one_node, random_trees
from onnx import TensorProto
from onnx.reference import ReferenceEvaluator

import graphexec as gx

RNG = np.random.default_rng(35)


def _ours(model: onnx.ModelProto, x: np.ndarray) -> list:
    session = gx.Session(gx.load(model))
    outs = list(session.run({"x": x}).outputs.values())
    fallback = [r.node.op for r in session.compiled.plan.runners.values() if getattr(r, "uses_fallback", False)]
    assert not fallback, f"ran through the reference: {fallback}"
    return outs


def _ort(model: onnx.ModelProto, x: np.ndarray) -> list:
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    return ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"]).run(None, {"x": x})


def _same(ours: list, theirs: list, rtol: float = 1e-5) -> None:
    for a, b in zip(ours, theirs):
        a, b = np.asarray(a), np.asarray(b)
        assert a.shape == b.shape
        if a.dtype.kind in "iuUSOb":
            np.testing.assert_array_equal(a, b.astype(a.dtype) if b.dtype.kind == "O" else b)
        else:
            np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol)


def _check(model: onnx.ModelProto, x: np.ndarray, rtol: float = 1e-5, onnxruntime: bool = True) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours = _ours(model, x)
        _same(ours, ReferenceEvaluator(model).run(None, {"x": x}), rtol)
        if onnxruntime:
            _same(ours, _ort(model, x), max(rtol, 1e-5))


def _x(rows: int = 64, feats: int = 6, nan: bool = True) -> np.ndarray:
    x = RNG.normal(size=(rows, feats)).astype(np.float32)
    if nan:
        x[::7, 1] = np.nan
    return x


@pytest.mark.parametrize("how", ["SUM", "AVERAGE", "MIN", "MAX"])
def test_tree_ensemble_regressor(how):
    attrs = random_trees(RNG, 5, 3, 6, 2, "target", ("BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT"))
    model = one_node("TreeEnsembleRegressor", 1, 6, n_targets=2, aggregate_function=how, base_values=[0.5, -1.0],
                     **attrs)
    _check(model, _x(), rtol=0 if how in ("MIN", "MAX") else 1e-6)


@pytest.mark.parametrize("post", ["NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO"])
def test_tree_ensemble_classifier(post):
    attrs = random_trees(RNG, 7, 4, 6, 3, "class")
    model = one_node("TreeEnsembleClassifier", 2, 6, classlabels_int64s=[4, 5, 6], post_transform=post, **attrs)
    _check(model, _x(), onnxruntime=post != "SOFTMAX_ZERO")


def test_tree_ensemble_binary_classifier_with_string_labels():
    """One score column; the weights probabilities (positive), as exporters write them: with
    negative weights onnxruntime scores the other class -s where the reference has 1 - s."""
    attrs = random_trees(RNG, 4, 3, 6, 1, "class")
    attrs["class_weights"] = [abs(w) / 4 for w in attrs["class_weights"]]
    model = one_node("TreeEnsembleClassifier", 2, 6, classlabels_strings=["no", "yes"], **attrs)
    _check(model, _x())


@pytest.mark.parametrize("kernel", ["LINEAR", "RBF", "POLY", "SIGMOID"])
def test_svm_classifier_one_vs_one(kernel):
    per_class, feats = [3, 4, 2], 5
    n = sum(per_class)
    model = one_node("SVMClassifier", 2, feats, classlabels_ints=[0, 1, 2], kernel_type=kernel,
                     kernel_params=[0.3, 0.1, 2.0], vectors_per_class=per_class,
                     support_vectors=RNG.normal(size=n * feats).astype(np.float32).tolist(),
                     coefficients=RNG.normal(size=2 * n).astype(np.float32).tolist(),
                     rho=RNG.normal(size=3).astype(np.float32).tolist())
    _check(model, _x(feats=feats, nan=False), rtol=1e-4)


def test_svm_regressor_and_linear_classifier():
    feats = 5
    svr = one_node("SVMRegressor", 1, feats, kernel_type="RBF", kernel_params=[0.2, 0.0, 3.0], n_supports=6,
                   support_vectors=RNG.normal(size=6 * feats).astype(np.float32).tolist(),
                   coefficients=RNG.normal(size=6).astype(np.float32).tolist(), rho=[0.25])
    _check(svr, _x(feats=feats, nan=False), rtol=1e-4)
    for post in ("NONE", "LOGISTIC", "SOFTMAX"):
        lin = one_node("LinearClassifier", 2, feats, classlabels_ints=[7, 8, 9], post_transform=post,
                       coefficients=RNG.normal(size=3 * feats).astype(np.float32).tolist(),
                       intercepts=[0.1, -0.2, 0.3])
        _check(lin, _x(feats=feats, nan=False))
    reg = one_node("LinearRegressor", 1, feats, targets=2, coefficients=RNG.normal(size=2 * feats).tolist(),
                   intercepts=[1.0, 2.0])
    _check(reg, _x(feats=feats, nan=False))


def test_transforms():
    x = _x(nan=False)
    _check(one_node("Scaler", 1, 6, offset=[0.1] * 6, scale=[2.0, 3.0, 0.5, 1.0, 1.5, 0.25]), x, rtol=0)
    for norm in ("MAX", "L1", "L2"):   # onnxruntime's MAX divides by the largest value, the reference's by |x|'s
        _check(one_node("Normalizer", 1, 6, norm=norm), x, onnxruntime=norm != "MAX")
    _check(one_node("Binarizer", 1, 6, threshold=0.2), x, rtol=0)
    _check(one_node("Imputer", 1, 6, imputed_value_floats=[9.0], replaced_value_float=float("nan")), _x(), rtol=0)
    codes = RNG.integers(0, 5, size=(10, 3)).astype(np.int64)
    _check(one_node("OneHotEncoder", 1, 3, TensorProto.INT64, cats_int64s=[0, 2, 3, 4]), codes, rtol=0)
    _check(one_node("LabelEncoder", 1, 3, TensorProto.INT64, keys_int64s=[0, 1, 2], values_floats=[0.5, 1.5, 2.5]),
           codes, rtol=0)


def test_ml_node_tests_run_own_kernels():
    cases = node_cases_without_fallback(r"^test_ai_onnx_ml_")
    assert len(cases) >= 8
    assert all(ok and not fallback for _, ok, fallback in cases), cases


def test_exported_models_equal_onnxruntime_and_the_reference():
    """A forest, a gradient-boosted classifier, an RBF SVC and a scaled logistic regression as
    skl2onnx writes them."""
    pytest.importorskip("sklearn")
    skl2onnx = pytest.importorskip("skl2onnx")
    from sklearn import ensemble, linear_model, pipeline, preprocessing, svm
    from sklearn.datasets import make_classification

    x, y = make_classification(300, 8, n_informative=5, n_classes=3, random_state=0)
    x = x.astype(np.float32)
    for est in (ensemble.RandomForestClassifier(10, max_depth=5, random_state=0),
                ensemble.GradientBoostingClassifier(n_estimators=5, random_state=0), svm.SVC(),
                pipeline.make_pipeline(preprocessing.StandardScaler(), linear_model.LogisticRegression())):
        est.fit(x[100:], y[100:])
        model = skl2onnx.to_onnx(est, x[:1], options={id(est): {"zipmap": False}} if not hasattr(est, "steps")
                                 else {id(est.steps[-1][1]): {"zipmap": False}}, target_opset={"": 17, "ai.onnx.ml": 3})
        model.graph.input[0].name = "x"
        for node in model.graph.node:
            node.input[:] = ["x" if i == "X" else i for i in node.input]
        _check(model, x[:100], rtol=1e-4)


@pytest.mark.parametrize("post", ["LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO", "PROBIT"])
@pytest.mark.parametrize("targets", [1, 3])
def test_tree_ensemble_regressor_post_transform_as_onnxruntime(post, targets):
    """The reference has no regressor post_transform (it raises); onnxruntime applies each
    to two targets or more and only PROBIT to one score."""
    attrs = random_trees(RNG, 5, 3, 6, targets, "target")
    model = one_node("TreeEnsembleRegressor", 1, 6, n_targets=targets, post_transform=post, **attrs)
    x = _x()
    _same(_ours(model, x), _ort(model, x), rtol=1e-5)


def _tree_ensemble_5(targets: int, post: int) -> onnx.ModelProto:
    """TreeEnsemble-5: per target t one stump on feature t (x <= 0.1 t), leaves 2t and 2t+1."""
    leaf_w = np.random.default_rng(targets).normal(size=2 * targets).astype(np.float32)
    node = onnx.helper.make_node(
        "TreeEnsemble", ["x"], ["y0"], domain="ai.onnx.ml", n_targets=targets, aggregate_function=1,
        post_transform=post, tree_roots=list(range(targets)), nodes_featureids=list(range(targets)),
        nodes_splits=onnx.numpy_helper.from_array(np.arange(targets, dtype=np.float32) * 0.1),
        nodes_modes=onnx.numpy_helper.from_array(np.zeros(targets, np.uint8)),
        nodes_truenodeids=[2 * t for t in range(targets)], nodes_trueleafs=[1] * targets,
        nodes_falsenodeids=[2 * t + 1 for t in range(targets)], nodes_falseleafs=[1] * targets,
        leaf_targetids=[t // 2 for t in range(2 * targets)], leaf_weights=onnx.numpy_helper.from_array(leaf_w))
    x = onnx.helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 6])
    graph = onnx.helper.make_graph([node], "te5", [x], [onnx.ValueInfoProto(name="y0")])
    return onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 21),
                                                        onnx.helper.make_opsetid("ai.onnx.ml", 5)])


@pytest.mark.parametrize("post", [1, 2, 3, 4])
@pytest.mark.parametrize("targets", [1, 3])
def test_tree_ensemble_5_post_transform_as_onnxruntime(post, targets):
    """The reference ignores TreeEnsemble's post_transform; onnxruntime applies it as for the
    regressor, but reads the enum in its own order (1 LOGISTIC, 2 SOFTMAX) where the spec has
    1 SOFTMAX, 2 LOGISTIC: ours follows the spec, so it equals onnxruntime given the other value."""
    x = _x(nan=False)
    ours = _ours(_tree_ensemble_5(targets, post), x)
    _same(ours, _ort(_tree_ensemble_5(targets, {1: 2, 2: 1}.get(post, post)), x), rtol=1e-5)


@pytest.mark.parametrize("classes", [2, 3, 4])
def test_svm_classifier_probabilities(classes):
    """Platt's sigmoid and libsvm's coupling: onnxruntime always; the reference for two classes
    (from three on it builds the coupling matrix differently, see ml_svm_proba)."""
    per_class, feats = [3, 4, 2, 3][:classes], 5
    n, pairs = sum(per_class), classes * (classes - 1) // 2
    model = one_node("SVMClassifier", 2, feats, classlabels_ints=list(range(7, 7 + classes)), kernel_type="RBF",
                     kernel_params=[0.3, 0.0, 3.0], vectors_per_class=per_class,
                     support_vectors=RNG.normal(size=n * feats).astype(np.float32).tolist(),
                     coefficients=RNG.normal(size=(classes - 1) * n).astype(np.float32).tolist(),
                     rho=RNG.normal(size=pairs).astype(np.float32).tolist(),
                     prob_a=(-RNG.random(pairs) * 3).astype(np.float32).tolist(),
                     prob_b=(RNG.normal(size=pairs) * 0.2).astype(np.float32).tolist())
    x = _x(rows=200, feats=feats, nan=False)
    ours = _ours(model, x)
    assert ours[1].shape == (200, classes)
    np.testing.assert_allclose(ours[1].sum(axis=1), 1, rtol=1e-5)
    _same(ours, _ort(model, x), rtol=1e-4)
    if classes == 2:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _same(ours, ReferenceEvaluator(model).run(None, {"x": x}), rtol=1e-4)
