"""Session(threads=N) against one thread on the light models: wall time and sameness.

Usage: python benchmarks/threads.py [--threads 2] [--streams 1,4] [--repeat 5] [--quick]
For each model and stream count, both sessions run the same input, alternating, after a
warm-up; the table gives the median host time of each, their ratio, and whether the
outputs (bytes) and the simulated stats (makespan and the rest) are identical. OpenBLAS
keeps one thread per call, so what runs in parallel is whole kernels.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")   # before numpy loads
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import glob  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import onnx  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # run from a checkout

import graphexec as gx  # noqa: E402

LIGHT = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")


def _stats(result: gx.Result) -> dict:
    d = result.stats.to_dict()
    d.pop("host_time_us")
    d.pop("compile_s")
    return d


def measure(graph: gx.Graph, streams: int, threads: int, repeat: int) -> tuple[float, float, bool]:
    """(one-thread ms, N-thread ms, identical) for ``graph`` on ``streams`` streams."""
    feeds = gx.default_feeds(graph)
    one, many = gx.Session(graph, streams=streams), gx.Session(graph, streams=streams, threads=threads)
    r1, rn = one.run(feeds), many.run(feeds)
    same = _stats(r1) == _stats(rn) and all(
        np.asarray(r1.outputs[k]).tobytes() == np.asarray(rn.outputs[k]).tobytes() for k in r1.outputs)
    t1, tn = [], []
    for _ in range(repeat):
        for sess, out in ((one, t1), (many, tn)):
            t0 = time.perf_counter()
            r = sess.run(feeds)
            out.append((time.perf_counter() - t0) * 1e3)
            same = same and all(np.asarray(r.outputs[k]).tobytes() == np.asarray(r1.outputs[k]).tobytes()
                                for k in r1.outputs)
    return statistics.median(t1), statistics.median(tn), same


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--streams", default="1,4")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="SqueezeNet, one repeat (CI smoke test)")
    args = ap.parse_args(argv)
    paths = sorted(glob.glob(os.path.join(LIGHT, "*.onnx")))
    if args.quick:
        paths, args.repeat = [p for p in paths if "squeezenet" in p], 1
    print(f"{'model':<14}{'streams':>8}{'1 thread ms':>13}{f'{args.threads} threads ms':>15}{'speedup':>9}"
          f"{'identical':>11}")
    all_same = True
    for path in paths:
        graph = gx.load(path)
        for n in (int(s) for s in args.streams.split(",")):
            t1, tn, same = measure(graph, n, args.threads, args.repeat)
            all_same &= same
            print(f"{os.path.basename(path)[6:-5]:<14}{n:>8}{t1:>13.1f}{tn:>15.1f}{t1 / tn:>8.2f}x"
                  f"{'yes' if same else 'NO':>11}", flush=True)
    print("outputs and simulated stats identical in every row" if all_same else "DIFFERENCES FOUND")
    return 0 if all_same else 1


if __name__ == "__main__":
    sys.exit(main())
