"""Host wall time of Session.run against onnxruntime (one intra-op thread), light models.

Usage: python benchmarks/host_speed.py [--repeat N] [--threads N] [--quick]
Both run the same input (the declared shapes' default feeds) in the same process,
alternating, after a warm-up; the table gives the median of each and their ratio, then
the geometric mean of ratios and the worst one against the targets.
"""

from __future__ import annotations

import os

# one BLAS thread, like onnxruntime's one intra-op thread (must be set before numpy loads)
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse
import glob
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import onnx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # run from a checkout

import graphexec as gx  # noqa: E402

LIGHT = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
TARGET_GEO, TARGET_MAX = 1.5, 3.0


def _ort_session(path: str):
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    return ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])


def _alternating_ms(fns: list, repeat: int) -> list[float]:
    """Median wall ms of each function, called in turn ``repeat`` times (noise hits both)."""
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeat):
        for fn, out in zip(fns, times):
            t0 = time.perf_counter()
            fn()
            out.append((time.perf_counter() - t0) * 1e3)
    return [statistics.median(t) for t in times]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--threads", type=int, default=1, help="Session(threads=N) (onnxruntime keeps one thread)")
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
        session = gx.Session(graph, threads=args.threads)
        ort = _ort_session(path)
        session.run(feeds)
        ort.run(None, feeds)  # warm-up: compile, caches
        ours, theirs = _alternating_ms([lambda: session.run(feeds), lambda: ort.run(None, feeds)], args.repeat)
        ratios.append(ours / theirs)
        print(f"{os.path.basename(path)[6:-5]:<14}{ours:>14.1f}{theirs:>16.1f}{ours / theirs:>8.2f}", flush=True)
    geo = float(np.exp(np.mean(np.log(ratios))))
    print(f"geometric mean ratio: {geo:.2f}x (graphexec / onnxruntime); worst {max(ratios):.2f}x "
          f"(targets: {TARGET_GEO}x, none beyond {TARGET_MAX:.0f}x)")
    print(_blas_line())


def _blas_line() -> str:
    """Which GEMM kernels numpy ran: onnxruntime's MLAS picks its own for the CPU, while an
    OPENBLAS_CORETYPE in the environment pins OpenBLAS (e.g. to AVX2 on an AVX-512 CPU,
    about half the GEMM speed), so a ratio means little without this line."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        arch = "unknown kernels (pip install threadpoolctl to see them)"
    else:
        blas = [i for i in threadpool_info() if i.get("user_api") == "blas"]
        arch = ", ".join(f"{i['internal_api']} {i.get('version')} {i.get('architecture')} kernels" for i in blas)
    line = f"numpy BLAS: {arch or 'none found'}"
    core = os.environ.get("OPENBLAS_CORETYPE")
    if core:
        line += (f"\nnote: OPENBLAS_CORETYPE={core} pins those kernels; onnxruntime is not pinned. For like "
                 "kernels: env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/host_speed.py")
    return line


if __name__ == "__main__":
    main()
