"""Session time against graph size: load, infer, lower, assign streams, plan memory, first run.

Usage: python benchmarks/compile_scale.py [--sizes 12500,25000,50000] [--streams 4] [--quick]
[--profile N]
The graph: four lanes of Add/Mul/Relu/Sigmoid on 8x8 float tensors, one node per lane
per layer, the op cycling by layer; a binary node reads its lane's latest value and the
next lane's. The table gives the total (load + compile + the first run, which simulates
the device and computes every kernel), each pass's time from ``compiled.state.timings``
and the first run's, and the growth of the total from the previous size (twice the nodes
should cost at most 2.2x the time: no quadratic pass). Targets (issue 20): the 50,000-node
graph on 4 streams in 6 s or less. ``--profile N`` prints the cProfile top lines of the
N-node graph's session (compile and first run).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # run from a checkout

import graphexec as gx  # noqa: E402

OPS = ("Add", "Mul", "Relu", "Sigmoid")
LANES = 4
TARGET_S, TARGET_GROWTH = 6.0, 2.2


def layered(n: int, lanes: int = LANES) -> onnx.ModelProto:
    """An ``n``-node layered graph: ``lanes`` chains that read each other's latest values."""
    latest = ["x"] * lanes
    nodes = []
    for k in range(n):
        lane, op = k % lanes, OPS[(k // lanes) % len(OPS)]
        ins = [latest[lane], latest[(lane + 1) % lanes]] if op in ("Add", "Mul") else [latest[lane]]
        out = f"v{k}"
        nodes.append(helper.make_node(op, ins, [out], name=f"n{k}"))
        latest[lane] = out
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 8])
    outs = [helper.make_tensor_value_info(v, TensorProto.FLOAT, [8, 8]) for v in dict.fromkeys(latest)]
    graph = helper.make_graph(nodes, f"layered{n}", [x], outs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def compile_once(n: int, streams: int) -> tuple[float, dict[str, float]]:
    """(seconds for load + compile + first run, per-stage seconds) of the ``n``-node graph;
    the stages end with "cpu s", the process's CPU time for the whole (less noisy than the
    wall clock on a shared machine)."""
    model = layered(n)
    feeds = {"x": np.ones((8, 8), np.float32)}
    c0, t0 = time.process_time(), time.perf_counter()
    graph = gx.load(model)
    t1 = time.perf_counter()
    session = gx.Session(graph, streams=streams)
    compiled = session.compile(feeds)
    t2 = time.perf_counter()
    session.run(feeds)
    t3 = time.perf_counter()
    return t3 - t0, {"load": t1 - t0, **compiled.state.timings, "first run": t3 - t2,
                     "cpu s": time.process_time() - c0}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="12500,25000,50000")
    ap.add_argument("--streams", type=int, default=4)
    ap.add_argument("--quick", action="store_true", help="a smoke run: 500 and 1000 nodes")
    ap.add_argument("--profile", type=int, default=0, help="cProfile the compile of this many nodes")
    args = ap.parse_args(argv)
    sizes = [500, 1000] if args.quick else [int(s) for s in args.sizes.split(",")]
    if args.profile:
        prof = cProfile.Profile()
        prof.runcall(compile_once, args.profile, args.streams)
        pstats.Stats(prof).sort_stats("cumulative").print_stats(25)
        return 0
    rows, prev = [], None
    for n in sizes:
        total, stages = compile_once(n, args.streams)
        rows.append((n, total, stages, total / prev if prev else None))
        prev = total
    names = list(rows[0][2])
    print(f"{'nodes':>7} {'total s':>8} {'growth':>7} " + " ".join(f"{s:>9}" for s in names))
    for n, total, stages, growth in rows:
        g = f"{growth:.2f}x" if growth else "-"
        print(f"{n:7d} {total:8.2f} {g:>7} " + " ".join(f"{stages.get(s, 0.0):9.2f}" for s in names))
    worst = max((g for *_, g in rows if g), default=0.0)
    last = rows[-1][1]
    print(f"largest {rows[-1][0]} nodes in {last:.2f} s (target {TARGET_S:.0f} s), worst growth "
          f"{worst:.2f}x per doubling (target {TARGET_GROWTH}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
