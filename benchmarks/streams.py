"""Multi-stream schedules on the light models: simulated time against one stream.

Usage: python benchmarks/streams.py [--quick] [--device ascend910]
For each model: one stream, each policy at 2/4/8 streams and auto; simulated device time,
speedup over one stream, the lower bound, waits before and after pruning.
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
CONFIGS = [(1, None), (2, "ge"), (4, "ge"), (4, "chains"), (4, "list"), (8, "list"), ("auto", None)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="SqueezeNet only (CI smoke test)")
    ap.add_argument("--device", default="ascend910")
    args = ap.parse_args()
    paths = sorted(glob.glob(os.path.join(LIGHT, "*.onnx")))
    if args.quick:
        paths = [p for p in paths if "squeezenet" in p]
    print(f"{'model':<14}{'streams':>8}{'policy':>8}{'used':>5}{'time us':>10}{'speedup':>8}{'bound us':>10}"
          f"{'time/bound':>11}{'waits':>7}{'pruned':>7}")
    for path in paths:
        graph = gx.load(path)
        feeds = gx.default_feeds(graph)
        base = None
        for streams, policy in CONFIGS:
            session = gx.Session(graph, streams=streams, policy=policy, device=args.device)
            s = session.run(feeds).stats
            base = base or s.makespan_us
            print(f"{os.path.basename(path)[6:-5]:<14}{streams!s:>8}{session.compiled.schedule.policy:>8}"
                  f"{s.num_streams:>5}{s.makespan_us:>10.1f}{base / s.makespan_us:>8.2f}{s.lower_bound_us:>10.1f}"
                  f"{s.makespan_us / s.lower_bound_us:>11.2f}{s.waits_before_pruning:>7}{s.num_events:>7}", flush=True)


if __name__ == "__main__":
    main()
