"""Host wall time of Session.run against onnxruntime (one intra-op thread), light models.

Usage: python benchmarks/host_speed.py [--repeat N] [--quick]
Both run the same input (arange(n)/n) in the same process, alternating, after a warm-up;
the table gives the median of each and their ratio, then the geometric mean of ratios.
"""

from __future__ import annotations

import os

# one BLAS thread, like onnxruntime's one intra-op thread (must be set before numpy loads)
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse
import glob
import statistics
import time

import numpy as np
import onnx

import graphexec as gx

LIGHT = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")


def _ort_session(path: str):
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    return ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])


def _median_ms(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="one small model, one repeat (CI smoke test)")
    args = ap.parse_args()
    paths = sorted(glob.glob(os.path.join(LIGHT, "*.onnx")))
    if args.quick:
        paths, args.repeat = [p for p in paths if "squeezenet" in p], 1
    print(f"{'model':<14}{'graphexec ms':>14}{'onnxruntime ms':>16}{'ratio':>8}")
    ratios = []
    for path in paths:
        graph = gx.load(path)
        feeds = gx.default_feeds(graph)
        session = gx.Session(graph)
        ort = _ort_session(path)
        session.run(feeds)
        ort.run(None, feeds)  # warm-up: compile, caches
        ours = _median_ms(lambda: session.run(feeds), args.repeat)
        theirs = _median_ms(lambda: ort.run(None, feeds), args.repeat)
        ratios.append(ours / theirs)
        print(f"{os.path.basename(path)[6:-5]:<14}{ours:>14.1f}{theirs:>16.1f}{ours / theirs:>8.2f}", flush=True)
    print(f"geometric mean ratio: {float(np.exp(np.mean(np.log(ratios)))):.2f}x (graphexec / onnxruntime)")


if __name__ == "__main__":
    main()
