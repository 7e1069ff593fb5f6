"""Classical ML (and detection ops): graphexec's host run time against onnxruntime, one thread each.

Usage: python benchmarks/ml_speed.py [--repeat N] [--only NAME,...] [--reference] [--nms] [--detection] [--quick]

Runs every model of ``ml_corpus.py``'s cache (built on first use; the exporters are needed
only then) on its 1000-row batch: graphexec's Session.run and onnxruntime (one intra-op
thread) alternating after a warm-up, the median of each and their ratio, and the geometric
mean. Each model's outputs are checked first against onnxruntime's and onnx.reference's:
labels exactly, scores within 1e-4 relative (printed as the largest difference).

--reference times what graphexec did before these ops had own kernels: the kernels of the
ops in OWN are taken out of the registry, so those nodes run through onnx.reference (the
fallback) as they used to. --nms adds a NonMaxSuppression model (4000 boxes, 1 class, IoU
0.7, up to 1000 kept: the size of a Faster R-CNN proposal step); --detection the torchvision
models of detection_corpus.py (exported on first use where torch and torchvision are
installed). --quick: the NMS model at 1000 boxes and three runs, with the corpus only where it is
cached already (what tests/test_benchmarks.py runs). Target (issue 35): no family above 3x
onnxruntime.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
import onnx  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # run from a checkout
sys.path.insert(0, str(Path(__file__).resolve().parent))

import detection_corpus  # noqa: E402
import ml_corpus  # noqa: E402

import graphexec as gx  # noqa: E402

OWN = [("ai.onnx.ml", op) for op in ("TreeEnsembleClassifier", "TreeEnsembleRegressor", "TreeEnsemble",
                                     "SVMClassifier", "SVMRegressor", "LinearClassifier", "LinearRegressor",
                                     "Scaler", "Normalizer", "OneHotEncoder", "Imputer", "ArrayFeatureExtractor",
                                     "LabelEncoder", "Binarizer")] + [("", "NonMaxSuppression"), ("", "RoiAlign")]


def without_own_kernels() -> None:
    """The registry as it was before: OWN's ops left to the reference fallback."""
    from graphexec.kernels import registry

    for key in OWN:
        registry._REGISTRY.pop(key, None)


def nms_model(n: int = 4000) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    from onnx import TensorProto, helper

    rng = np.random.default_rng(0)
    xy = rng.uniform(0, 800, (1, n, 2)).astype(np.float32)
    boxes = np.concatenate([xy, xy + rng.uniform(5, 100, (1, n, 2)).astype(np.float32)], axis=-1)
    scores = rng.random((1, 1, n)).astype(np.float32)
    consts = [helper.make_tensor("m", TensorProto.INT64, [1], [1000]), helper.make_tensor("i", TensorProto.FLOAT, [1],
                                                                                       [0.7])]
    node = helper.make_node("NonMaxSuppression", ["boxes", "scores", "m", "i"], ["y"])
    graph = helper.make_graph([node], "nms", [helper.make_tensor_value_info("boxes", TensorProto.FLOAT, [1, n, 4]),
                                              helper.make_tensor_value_info("scores", TensorProto.FLOAT, [1, 1, n])],
                              [helper.make_tensor_value_info("y", TensorProto.INT64, [None, 3])], consts)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)]), {"boxes": boxes, "scores": scores}


def _ort(model: onnx.ModelProto) -> Any:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = opts.inter_op_num_threads = 1
    return ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])


def check(ours: list[Any], theirs: list[Any]) -> float:
    """The largest relative difference of float outputs; labels must be equal (AssertionError)."""
    worst = 0.0
    for a, b in zip(ours, theirs):
        a, b = np.asarray(a), np.asarray(b)
        assert a.shape == b.shape, (a.shape, b.shape)
        if a.dtype.kind in "iuUSOb":
            assert (a == b).all(), "labels differ"
        else:
            worst = max(worst, float(np.max(np.abs(a - b) / (1 + np.abs(b)))) if a.size else 0.0)
    return worst


def time_model(name: str, model: onnx.ModelProto, feeds: dict[str, np.ndarray], repeat: int) -> tuple[float, float]:
    session, ort = gx.Session(gx.load(model)), _ort(model)
    ours = list(session.run(feeds).outputs.values())
    theirs = ort.run(None, feeds)
    diff = check(ours, theirs)
    ref = _reference(model, feeds)
    diff_ref = check(ours, ref) if ref is not None else float("nan")
    g, o = [], []
    for _ in range(repeat):
        t = time.perf_counter()
        session.run(feeds)
        g.append(time.perf_counter() - t)
        t = time.perf_counter()
        ort.run(None, feeds)
        o.append(time.perf_counter() - t)
    gm, om = statistics.median(g), statistics.median(o)
    print(f"{name:30s} {gm * 1e3:10.2f} {om * 1e3:10.3f} {gm / om:9.1f}x   "
          f"vs ort {diff:.1e}, vs reference {diff_ref:.1e}")
    return gm, om


def _reference(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[Any] | None:
    """onnx.reference's outputs, or None where it cannot run the model (its own gaps)."""
    from onnx.reference import ReferenceEvaluator

    try:
        return list(ReferenceEvaluator(model).run(None, feeds))
    except Exception:  # noqa: BLE001
        return None


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--only", default="")
    p.add_argument("--reference", action="store_true", help="time with OWN's ops through onnx.reference (before)")
    p.add_argument("--nms", action="store_true")
    p.add_argument("--detection", action="store_true")
    p.add_argument("--quick", action="store_true")
    args = p.parse_args()
    if args.quick:
        args.repeat, args.nms = min(args.repeat, 3), True
    if args.reference:
        without_own_kernels()
    warnings.simplefilter("ignore")
    cases = []
    for path in (ml_corpus.cached() if args.quick else ml_corpus.build()):
        if not args.only or path.stem in args.only.split(","):
            model = onnx.load(str(path))
            cases.append((path.stem, model, {model.graph.input[0].name: np.load(path.with_suffix(".npz"))["x"]}))
    if args.nms:
        n = 1000 if args.quick else 4000
        cases.append((f"nms_{n}_boxes", *nms_model(n)))
    if args.detection:
        for path in detection_corpus.build():
            cases.append((path.stem, onnx.load(str(path)), {"image": np.load(path.with_suffix(".npz"))["image"]}))
    print(f"{'model':30s} {'graphexec ms':>10s} {'ort ms':>10s} {'ratio':>10s}   "
          f"({'reference fallback' if args.reference else 'own kernels'}, median of {args.repeat})")
    ratios = [g / o for g, o in (time_model(n, m, f, args.repeat) for n, m, f in cases)]
    if ratios:
        print(f"geometric mean {float(np.exp(np.mean(np.log(ratios)))):.2f}x, worst {max(ratios):.1f}x "
              f"(target: no family above 3x)")


if __name__ == "__main__":
    main()
