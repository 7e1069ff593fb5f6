"""Host time of a repeated multi-card run: the tape and the replay steps against the plain path.

Usage: python benchmarks/multi_host.py [--quick] [--repeat N] [--devices N] [--microbatches M]
       [--batch B] [--only NAME,...] [--modes data,pipeline,tensor]

One session per light model, mode and path, each warmed up by two runs (the first run of
a signature simulates and records its tape, ``cluster/tape.py``), then timed alternating,
round after round, in one process:

- ``replay``: as a session runs (a recorded signature replays its tape; kernels through
  the plans' replay steps, ``Steps.inline``);
- ``simulate``: every run simulates (``cluster.tape.REPLAY`` off), kernels through the replay steps;
- ``plain``: every run simulates and every kernel is its KernelCall (the steps' switch
  off, as ``tests/unit/engine/test_replay_steps.py`` turns it off): the path before.

The table gives each path's median (``--best``: its fastest run, on a machine others
share) in ms and ``plain / replay``. Pipeline runs never replay (their slot buffers come
from the caching allocator), so their two first columns differ by the steps alone.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import contextlib
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import onnx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # run from a checkout

import graphexec as gx  # noqa: E402
from graphexec.cluster import tape  # noqa: E402
from graphexec.engine.steps import Steps  # noqa: E402

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
PATHS = ("replay", "simulate", "plain")


@contextlib.contextmanager
def path(name: str) -> Iterator[None]:
    """Runs as ``name`` says (see the module docstring)."""
    saved = tape.REPLAY, Steps._direct, Steps._hold
    tape.REPLAY = name == "replay"
    if name == "plain":
        Steps._direct = lambda self, i, task, ctx: False   # type: ignore[method-assign]
        Steps._hold = lambda self, i, ctx: False   # type: ignore[method-assign]
    try:
        yield
    finally:
        tape.REPLAY, Steps._direct, Steps._hold = saved   # type: ignore[method-assign]


def bench(name: str, mode: str, args: argparse.Namespace) -> dict[str, list[float]]:
    graph = gx.load(LIGHT / f"light_{name}.onnx")
    x = graph.inputs[0]
    feeds = {x: np.random.default_rng(0).standard_normal((args.batch, *graph.values[x].type.shape[1:]))
             .astype(np.float32)}
    m = 1 if mode == "tensor" else args.microbatches
    sessions: dict[str, Any] = {}
    outs = {}
    for p in PATHS:
        with path(p):
            sessions[p] = gx.Session(graph, devices=args.devices, parallel=mode, microbatches=m)
            sessions[p].run(feeds)
            outs[p] = sessions[p].run(feeds).outputs
    ref = outs["plain"]
    assert all(outs[p][k].tobytes() == ref[k].tobytes() for p in PATHS for k in ref), "paths disagree"
    times: dict[str, list[float]] = {p: [] for p in PATHS}
    for _ in range(args.repeat):
        for p in PATHS:
            with path(p):
                t0 = time.perf_counter()
                sessions[p].run(feeds)
                times[p].append(time.perf_counter() - t0)
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="squeezenet, data, 2 cards, 2 rounds")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--devices", type=int, default=4)
    ap.add_argument("--microbatches", type=int, default=2)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--only", default="resnet50,squeezenet")
    ap.add_argument("--modes", default="data,pipeline")
    ap.add_argument("--best", action="store_true", help="each path's fastest run instead of its median")
    args = ap.parse_args()
    models, modes = args.only.split(","), args.modes.split(",")
    if args.quick:
        models, modes, args.devices, args.repeat, args.batch = ["squeezenet"], ["data"], 2, 2, 4
    pick = min if args.best else statistics.median
    print(f"{'model':<14}{'mode':<10}" + "".join(f"{p + ' ms':>13}" for p in PATHS) + f"{'plain/replay':>14}")
    for name in models:
        for mode in modes:
            t = {p: pick(v) * 1e3 for p, v in bench(name, mode, args).items()}
            print(f"{name:<14}{mode:<10}" + "".join(f"{t[p]:>13.1f}" for p in PATHS)
                  + f"{t['plain'] / t['replay']:>13.2f}x", flush=True)


if __name__ == "__main__":
    main()
