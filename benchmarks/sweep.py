"""Timing-only simulation and sweeps: how much faster ``Session.simulate`` is than a full
run, how many tasks per second the simulator gets through, and how fast a sweep goes on
each backend.

Usage: python benchmarks/sweep.py [--quick] [--repeat N] [--no-ray]

Part 1, one line per light model (streams=4): ``full`` is the first run of a freshly
compiled plan (the simulation plus every kernel's numpy math), ``timing`` the first
``simulate`` of another freshly compiled plan (the simulation alone), each the best of
``--repeat`` fresh sessions, compile excluded; ``speedup`` is full / timing and
``tasks/s`` the run's simulated tasks (``stats.num_tasks``: kernels, copies, event
records and waits) per second of ``timing``, on one core. The last line has the geomean
speedup and the tasks/s over all models together, against the targets (issues 19 and 20,
round two): >= 10x geomean, >= 200,000 tasks/s per core.

Part 2, one line per backend: the sweep of every light model x 3 devices x 4 stream
counts x 4 policies (432 points, diagnosis included) on one process, a pool of 2 and Ray
started locally with 2 CPUs (skipped when ray is not installed), its wall time, points
per second, and whether its rows equal the one-process rows (host seconds apart).
--quick: two light models in part 1 and an 8-point sweep without Ray (CI smoke test).
"""

from __future__ import annotations

import argparse
import glob
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

import onnx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))   # run from a checkout

import graphexec as gx  # noqa: E402
from graphexec.sweep.point import TIMES  # noqa: E402

LIGHT = sorted(glob.glob(os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light", "*.onnx")))
QUICK = ("light_squeezenet", "light_zfnet512")
TARGET_SPEEDUP = 10.0          # full / timing, geomean over the light models
TARGET_TASKS_PER_S = 200_000   # simulated tasks per second of one core, all models together


def first_run(graph: gx.Graph, feeds: dict[str, Any], timing: bool, repeat: int) -> tuple[float, int]:
    """Best seconds of the first run (full or timing-only) of a freshly compiled plan, and its task count."""
    best, tasks, result = math.inf, 0, None
    for _ in range(repeat):
        session = gx.Session(graph, streams=4)
        session.compile(feeds)
        result = None   # the last run's result (and its session) is freed here, not inside the timing
        t0 = time.perf_counter()
        result = session.simulate(feeds) if timing else session.run(feeds)
        best = min(best, time.perf_counter() - t0)
        tasks = result.stats.num_tasks
    return best, tasks


def part1(paths: list[str], repeat: int) -> None:
    print(f"{'model':<22} {'tasks':>6} {'full (ms)':>10} {'timing (ms)':>12} {'speedup':>8} {'tasks/s':>10}")
    ratios, all_tasks, all_s = [], 0, 0.0
    for path in paths:
        graph = gx.load(path)
        feeds = gx.default_feeds(graph)
        full, _ = first_run(graph, feeds, False, repeat)
        timing, tasks = first_run(graph, feeds, True, repeat)
        ratios.append(full / timing)
        all_tasks, all_s = all_tasks + tasks, all_s + timing
        print(f"{Path(path).stem:<22} {tasks:>6} {1e3 * full:>10.2f} {1e3 * timing:>12.2f} {full / timing:>7.1f}x "
              f"{tasks / timing:>10,.0f}")
    geo = math.exp(sum(map(math.log, ratios)) / len(ratios))
    rate = all_tasks / all_s
    print(f"{'all (geomean)':<22} {all_tasks:>6} {'':>10} {1e3 * all_s:>12.2f} {geo:>7.1f}x {rate:>10,.0f}")
    print(f"targets: speedup {geo:.1f}x {'meets' if geo >= TARGET_SPEEDUP else 'MISSES'} >= {TARGET_SPEEDUP:.0f}x; "
          f"{rate:,.0f} tasks/s {'meets' if rate >= TARGET_TASKS_PER_S else 'MISSES'} >= {TARGET_TASKS_PER_S:,}")


def _same(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in r.items() if k not in TIMES} for r in rows]


def part2(paths: list[str], grid: dict[str, Any], ray: bool) -> None:
    points = len(paths) * math.prod(len(v) for v in grid.values())
    print(f"\n{'backend':<22} {'points':>6} {'wall (s)':>10} {'points/s':>10}  rows")
    base: list[dict[str, Any]] | None = None
    runs: list[tuple[str, dict[str, Any]]] = [("local, 1 worker", {"workers": 1}), ("local, 2 workers", {"workers": 2})]
    if ray:
        runs.append(("ray local, 2 CPUs", {"backend": "ray"}))
    for name, how in runs:
        if how.get("backend") == "ray":
            import ray as ray_

            ray_.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        t0 = time.perf_counter()
        rows = gx.sweep(paths, **grid, **how)
        wall = time.perf_counter() - t0
        if how.get("backend") == "ray":
            ray_.shutdown()
        base = base if base is not None else rows
        same = "same" if _same(rows) == _same(base) else "DIFFER"
        failed = sum(r["error"] is not None for r in rows)
        print(f"{name:<22} {points:>6} {wall:>10.2f} {points / wall:>10.1f}  {same}, {failed} failed")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="two models, an 8-point sweep, no Ray")
    ap.add_argument("--repeat", type=int, default=3, help="fresh sessions per measurement (best kept)")
    ap.add_argument("--no-ray", action="store_true", help="leave Ray out of part 2")
    args = ap.parse_args()
    paths = [p for p in LIGHT if Path(p).stem in QUICK] if args.quick else LIGHT
    part1(paths, 1 if args.quick else args.repeat)
    if args.quick:
        grid = {"device": ["ascend910"], "streams": [1, 4], "policy": ["ge", "list"]}
    else:
        grid = {"device": ["ascend910", "ascend910b", "ascend310p"], "streams": [1, 2, 4, 8],
                "policy": ["ge", "chains", "list", "auto"]}
    try:
        import ray  # noqa: F401
        have_ray = True
    except ImportError:
        have_ray = False
    part2(paths, grid, have_ray and not args.quick and not args.no_ray)


if __name__ == "__main__":
    main()
