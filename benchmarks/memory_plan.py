"""Memory planner against its lower bound and against no reuse, on the light models.

Usage: python benchmarks/memory_plan.py [--streams 1,4] [--quick]
Prints, per model and stream count: the activation pool; the most bytes live at one moment
as executed ("live") and the most that may be live together under the schedule's partial
order ("cut", the bound for any plan safe under every timing), each with the pool's ratio
to it; and the saving against giving every tensor its own bytes.
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
from pathlib import Path

import onnx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # run from a checkout

import graphexec as gx  # noqa: E402

LIGHT = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--streams", default="1,4")
    ap.add_argument("--quick", action="store_true", help="two small models only (CI smoke test)")
    args = ap.parse_args()
    paths = sorted(glob.glob(os.path.join(LIGHT, "*.onnx")))
    if args.quick:
        paths = [p for p in paths if "squeezenet" in p or "alexnet" in p]
    print(f"{'model':<14}{'streams':>8}{'pool MiB':>10}{'live MiB':>10}{'ratio':>7}{'cut MiB':>9}{'ratio':>7}"
          f"{'no reuse MiB':>13}{'saving':>8}")
    for path in paths:
        graph = gx.load(path)
        feeds = gx.default_feeds(graph)
        for n in (int(x) for x in args.streams.split(",")):
            s = gx.Session(graph, streams=n).run(feeds).stats
            name = os.path.basename(path)[6:-5]
            cut = s.cut_bound_bytes or s.lower_bound_bytes
            print(f"{name:<14}{n:>8}{s.peak_bytes / 2**20:>10.2f}{s.lower_bound_bytes / 2**20:>10.2f}"
                  f"{s.peak_bytes / max(1, s.lower_bound_bytes):>7.3f}{cut / 2**20:>9.2f}"
                  f"{s.peak_bytes / max(1, cut):>7.3f}"
                  f"{s.no_reuse_bytes / 2**20:>13.2f}{s.no_reuse_bytes / max(1, s.peak_bytes):>7.1f}x", flush=True)


if __name__ == "__main__":
    main()
