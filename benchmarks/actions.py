"""The diagnosis' actions on the onnx package's light models: what each setting buys, measured.

Usage: python benchmarks/actions.py [--device ascend910] [--models alexnet,resnet50]
Each model is simulated (no kernel computed) on one stream as run by default, with fusion
off, with host launch and under must_keep_origin_dtype; a row gives the makespan, the first
cause (what bounds the run) and the actions advised, each with its measured gain and flag,
and the diagnosis' own seconds (its re-compiles and re-simulations). The README's table of
actions is this script's output.
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
import time
from pathlib import Path

import onnx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # run from a checkout

import graphexec as gx  # noqa: E402

SETTINGS: list[tuple[str, dict[str, object]]] = [
    ("default", {}), ("fusion off", {"fusion": False}), ("host launch", {"launch": "host"}),
    ("must_keep_origin_dtype", {"precision_mode": "must_keep_origin_dtype"})]


def light_models() -> dict[str, str]:
    folder = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
    return {os.path.basename(p)[len("light_"):-len(".onnx")]: p for p in sorted(glob.glob(f"{folder}/*.onnx"))}


def row(name: str, graph: gx.Graph, setting: str, kw: dict[str, object], device: str) -> str:
    result = gx.Session(graph, device=device, **kw).simulate()   # type: ignore[arg-type]
    t0 = time.perf_counter()
    d = result.diagnosis
    took = time.perf_counter() - t0
    acts = ", ".join(f"{a.name} {a.gain:.2f}x ({a.flag})" for a in d.actions) or "none"
    return (f"{name:14s} {setting:24s} {result.stats.makespan_us:14,.1f} us  {d.reason} {d.causes[0].gain:.2f}x"
            f"  | {acts} | diagnosis {took:.2f} s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="ascend910")
    ap.add_argument("--models", help="comma-separated names (default: all nine)")
    args = ap.parse_args()
    models = light_models()
    names = args.models.split(",") if args.models else list(models)
    print(f"{'model':14s} {'as run':24s} {'makespan':>17s}  first cause  | actions (gain, flag)")
    for name in names:
        graph = gx.load(models[name])
        for setting, kw in SETTINGS:
            print(row(name, graph, setting, kw, args.device), flush=True)


if __name__ == "__main__":
    main()
