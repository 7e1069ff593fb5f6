"""A corpus of classical-ML ONNX models written by real exporters, for ml_speed.py and the tests.

Usage: python benchmarks/ml_corpus.py [--out DIR]

Fits small scikit-learn, LightGBM and XGBoost models on synthetic data (fixed seeds) and
exports them with skl2onnx / onnxmltools into ``~/.cache/graphexec/ml`` (or DIR), with each
model's input batch beside it (``<name>.npz``). The exporters are tools of the benchmark,
not dependencies of graphexec: ``pip install scikit-learn skl2onnx onnxmltools lightgbm
xgboost``; a family whose exporter is missing is skipped with a line saying so.
"""

from __future__ import annotations

import argparse
import os
import warnings
from pathlib import Path
from typing import Any, Callable

import numpy as np

CACHE = Path(os.environ.get("GRAPHEXEC_ML_CACHE", Path.home() / ".cache" / "graphexec" / "ml"))
ROWS = 1000   # rows per input batch (fitting uses 1000 more)


def _data(classes: int | None, feats: int = 20) -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import make_classification, make_regression

    if classes is None:
        x, y = make_regression(2 * ROWS, feats, n_informative=10, random_state=0)
    else:
        x, y = make_classification(2 * ROWS, feats, n_informative=10, n_classes=classes, random_state=0)
    return x.astype(np.float32), y


def _sklearn() -> dict[str, Callable[[], tuple[Any, np.ndarray]]]:
    from sklearn import ensemble, linear_model, pipeline, preprocessing, svm, tree
    from sklearn.impute import SimpleImputer

    def clf(make: Callable[[], Any], classes: int = 3) -> Callable[[], tuple[Any, np.ndarray]]:
        return lambda: _fit(make(), *_data(classes))

    def reg(make: Callable[[], Any]) -> Callable[[], tuple[Any, np.ndarray]]:
        return lambda: _fit(make(), *_data(None))

    return {
        "sk_random_forest_clf": clf(lambda: ensemble.RandomForestClassifier(100, max_depth=10, random_state=0)),
        "sk_random_forest_reg": reg(lambda: ensemble.RandomForestRegressor(100, max_depth=10, random_state=0)),
        "sk_gradient_boosting_clf": clf(lambda: ensemble.GradientBoostingClassifier(n_estimators=50, random_state=0)),
        "sk_decision_tree_clf": clf(lambda: tree.DecisionTreeClassifier(random_state=0), 2),
        "sk_svc_rbf": clf(lambda: svm.SVC(random_state=0)),
        "sk_svc_linear_binary": clf(lambda: svm.SVC(kernel="linear", random_state=0), 2),
        "sk_svr_rbf": reg(lambda: svm.SVR()),
        "sk_linear_svc": clf(lambda: svm.LinearSVC(random_state=0)),
        "sk_logistic_regression": clf(lambda: linear_model.LogisticRegression(max_iter=500)),
        "sk_logistic_binary": clf(lambda: linear_model.LogisticRegression(max_iter=500), 2),
        "sk_ridge": reg(lambda: linear_model.Ridge()),
        "sk_scaler_logistic": clf(lambda: pipeline.make_pipeline(preprocessing.StandardScaler(),
                                                                 linear_model.LogisticRegression(max_iter=500))),
        "sk_normalizer_svr": reg(lambda: pipeline.make_pipeline(preprocessing.Normalizer(), svm.LinearSVR())),
        "sk_imputer_binarizer_forest": clf(lambda: pipeline.make_pipeline(
            SimpleImputer(), preprocessing.Binarizer(threshold=0.1),
            ensemble.RandomForestClassifier(30, max_depth=6, random_state=0))),
    }


def _fit(model: Any, x: np.ndarray, y: np.ndarray) -> tuple[Any, np.ndarray]:
    model.fit(x[ROWS:], y[ROWS:])
    batch = x[:ROWS].copy()
    batch[::97, 3] = np.nan if _takes_nan(model) else batch[::97, 3]
    return model, batch


def _takes_nan(model: Any) -> bool:
    return "SimpleImputer" in str(model) or "HistGradient" in type(model).__name__


def _export_sklearn(model: Any, x: np.ndarray) -> Any:
    from skl2onnx import to_onnx

    opsets = {"": 17, "ai.onnx.ml": 3}
    if not hasattr(model, "classes_"):
        return to_onnx(model, x[:1], target_opset=opsets)
    try:   # classifiers' probabilities as a tensor, not ZipMap's list of dicts
        return to_onnx(model, x[:1], options={id(model): {"zipmap": False}}, target_opset=opsets)
    except NameError:   # a classifier without that option (LinearSVC)
        return to_onnx(model, x[:1], target_opset=opsets)


def _boosters() -> dict[str, Callable[[], tuple[Any, np.ndarray]]]:
    import lightgbm
    import xgboost

    return {
        "lgbm_clf": lambda: _fit(lightgbm.LGBMClassifier(n_estimators=100, num_leaves=31, verbose=-1), *_data(3)),
        "lgbm_reg": lambda: _fit(lightgbm.LGBMRegressor(n_estimators=100, num_leaves=31, verbose=-1), *_data(None)),
        "xgb_clf": lambda: _fit(xgboost.XGBClassifier(n_estimators=100, max_depth=6), *_data(3)),
        "xgb_reg": lambda: _fit(xgboost.XGBRegressor(n_estimators=100, max_depth=6), *_data(None)),
    }


def _export_booster(model: Any, x: np.ndarray) -> Any:
    import onnxmltools
    from onnxmltools.convert.common.data_types import FloatTensorType

    kind = type(model).__module__.split(".")[0]
    convert = onnxmltools.convert_lightgbm if kind == "lightgbm" else onnxmltools.convert_xgboost
    types = [("input", FloatTensorType([None, x.shape[1]]))]
    if kind == "lightgbm":
        return convert(model, initial_types=types, target_opset=15, zipmap=False)
    return convert(model, initial_types=types, target_opset=15)


def build(out: Path = CACHE) -> list[Path]:
    """Export every model whose exporter is installed (once: a cached file is kept); the paths."""
    import onnx

    out.mkdir(parents=True, exist_ok=True)
    families: list[tuple[str, Callable[[], dict], Callable[[Any, np.ndarray], Any]]] = [
        ("skl2onnx", _sklearn, _export_sklearn), ("onnxmltools", _boosters, _export_booster)]
    paths = []
    for tool, makers, export in families:
        try:
            table = makers()
        except ImportError as e:
            print(f"{tool}: skipped ({e})")
            continue
        for name, make in table.items():
            path = out / f"{name}.onnx"
            if not path.exists():
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    model, x = make()
                    try:
                        proto = export(model, x)
                    except Exception as e:  # noqa: BLE001  (an exporter's own failure: said, then skipped)
                        print(f"{name}: {tool} cannot export it ({type(e).__name__}: {str(e)[:120]})")
                        continue
                    onnx.save(proto, str(path))
                    np.savez(out / f"{name}.npz", x=x)
            paths.append(path)
    return paths


def cached(out: Path = CACHE) -> list[Path]:
    """The models exported already (none where the corpus was never built)."""
    return sorted(out.glob("*.onnx")) if out.is_dir() else []


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=CACHE)
    for path in build(p.parse_args().out):
        print(path)


if __name__ == "__main__":
    main()
