"""Host time per task of Session.run on a chain of tiny kernels, beyond the math itself.

Usage: python benchmarks/task_overhead.py [--tasks 10000] [--repeat 5] [--quick] [--profile]
A chain of N Relu nodes on a 4-float tensor runs through the whole engine: the first run
simulates the device and replays the kernels in simulated order; later runs of the same
compiled plan replay the recorded timeline (the simulation does not depend on the data).
"math" is N calls of the kernel's numpy operation alone; the overhead is what the
engine adds per task (reads, dispatch, writes, simulation, stats). Wall times are
medians of ``--repeat`` runs. ``--profile`` prints the cProfile top lines of both runs.
Target (issue 20, round two): at most 3 us of engine overhead per task, for the replayed
runs and for the first run (which also simulates).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from onnx import TensorProto, helper

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # run from a checkout

import graphexec as gx  # noqa: E402

TARGET_US = 3.0   # engine overhead per task (issue 20, round two; round one was 5 us)


def chain(n: int) -> gx.Graph:
    """``n`` Relu nodes in a row on a float32[4]."""
    nodes = [helper.make_node("Relu", ["x" if i == 0 else f"v{i - 1}"], [f"v{i}"], name=f"r{i}") for i in range(n)]
    g = helper.make_graph(nodes, f"chain{n}", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                          [helper.make_tensor_value_info(f"v{n - 1}", TensorProto.FLOAT, [4])])
    return gx.load(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))


def _ms(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _math_s(n: int, repeat: int) -> float:
    x, y = np.ones(4, np.float32), np.empty(4, np.float32)

    def run() -> None:
        for _ in range(n):
            np.maximum(x, 0, out=y)
    return _ms(run, repeat)


def _first_run_s(graph: gx.Graph, feeds: dict, repeat: int) -> float:
    """A run that simulates: a fresh session each time, compiled beforehand."""
    times = []
    for _ in range(repeat):
        s = gx.Session(graph)
        s.compile(feeds)
        t0 = time.perf_counter()
        s.run(feeds)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _profile(fn, title: str, lines: int = 15) -> None:
    print(f"\n--- cProfile: {title} (top {lines} by own time)")
    prof = cProfile.Profile()
    prof.runcall(fn)
    pstats.Stats(prof).sort_stats("tottime").print_stats(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="a smoke run: 300 tasks, once")
    ap.add_argument("--profile", action="store_true", help="print the cProfile top lines")
    args = ap.parse_args(argv)
    n, repeat = (300, 1) if args.quick else (args.tasks, max(1, args.repeat))
    graph = chain(n)
    feeds = {"x": np.linspace(-1, 1, 4, dtype=np.float32)}
    session = gx.Session(graph)
    session.run(feeds)
    math = _math_s(n, repeat) / n * 1e6
    rows = [("first run (simulate + replay)", _first_run_s(graph, feeds, repeat)),
            ("later runs (replay)", _ms(lambda: session.run(feeds), repeat))]
    print(f"{'case':32} {'tasks':>6} {'wall us/task':>13} {'math us/task':>13} {'overhead us':>12}")
    for name, wall in rows:
        us = wall / n * 1e6
        print(f"{name:32} {n:6d} {us:13.2f} {math:13.2f} {us - math:12.2f}")
    for name, wall in rows:
        over = wall / n * 1e6 - math
        print(f"{name.split(' (')[0]}: overhead {over:.2f} us per task, {'within' if over <= TARGET_US else 'OVER'} "
              f"the {TARGET_US:.0f} us target")
    if args.profile:
        _profile(lambda: session.run(feeds), "a replayed run")
        fresh = gx.Session(graph)
        fresh.compile(feeds)
        _profile(lambda: fresh.run(feeds), "a first run")
    return 0


if __name__ == "__main__":
    sys.exit(main())
