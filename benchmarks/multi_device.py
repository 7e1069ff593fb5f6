"""Graphs across cards: each light model and a transformer encoder on 1/2/4/8 cards in
each parallel mode, in simulated device time.

Usage: python benchmarks/multi_device.py [--quick] [--batch N] [--system NAME] [--compute]

One line per model, mode and card count: the simulated makespan, the speedup over one
card (the whole batch on one card through the same launches, host copies included), the
pipeline bubble (at 4 micro-batches)
(``stats.extra["bubble"]``, "-" where the mode has none), ``comm_hidden`` (the share of
communication time that overlaps compute) and the activation peak of the largest card.
A mode that is not registered in ``cluster/spread.py`` prints "n/a"; one that refuses
the model prints why. The encoder is ``minilm_l3_paraphrase`` of tests/real_models.py
(fetched into the model cache on first use; skipped, with the reason, when it cannot be).
--quick: one light model on 1 and 2 cards (CI smoke test). The runs are timing-only
(``compute=False``: the same simulated numbers as full runs, which tests check); --compute
computes the outputs too.
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import onnx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))   # run from a checkout

import graphexec as gx  # noqa: E402
from graphexec.cluster import MODES, implemented  # noqa: E402
from graphexec.errors import GraphExecError  # noqa: E402

LIGHT = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
ENCODER = "minilm_l3_paraphrase"
MICROBATCHES = 4   # the pipeline's (auto tries its own counts)


def light_models(batch: int) -> list[tuple[str, gx.Graph, dict[str, Any]]]:
    out = []
    for path in sorted(glob.glob(os.path.join(LIGHT, "*.onnx"))):
        graph = gx.load(path)
        name = graph.inputs[0]
        shape = (batch, *graph.values[name].type.shape[1:])
        out.append((os.path.basename(path)[6:-5], graph,
                    {name: np.random.default_rng(0).standard_normal(shape).astype(np.float32)}))
    return out


def encoder(batch: int) -> tuple[str, gx.Graph, dict[str, Any]] | str:
    """The transformer encoder at ``batch`` x 32 tokens, or why it is not there."""
    sys.path.insert(0, str(ROOT / "tests"))
    import real_models as rm

    entry = next(e for e in rm.MANIFEST if e.name == ENCODER)
    path = rm.fetch(entry)
    if path is None:
        return f"not fetched: {rm.fetch_reason(entry)}"
    shapes = {name: (batch, 32) for name, _, _ in rm.model_inputs(path)}
    return ENCODER, gx.load(str(path)), rm.make_feeds(replace(entry, shapes=shapes), path)


def rows(name: str, graph: gx.Graph, feeds: dict[str, Any], counts: list[int], modes: list[str],
         system: str | None, compute: bool) -> None:
    base = gx.compare(graph, devices=[1], feeds=feeds, system=system, compute=compute).rows[0]
    print(_line(name, "-", 1, base.makespan_us, 1.0, None, 0.0, base.peak_bytes), flush=True)
    have = implemented()
    for mode in modes:
        if mode not in have:
            print(f"{name:<22}{mode:<10}n/a (not implemented)", flush=True)
            continue
        for n in counts:
            if n == 1:
                continue
            try:
                m = MICROBATCHES if mode == "pipeline" else 1
                s = gx.Session(graph, devices=n, parallel=mode, microbatches=m, system=system,
                               compute=compute).run(feeds).stats
            except GraphExecError as e:
                print(f"{name:<22}{mode:<10}{n:>8}  refused: {str(e).splitlines()[0][:100]}", flush=True)
                continue
            label = mode if mode != "auto" else f"auto:{getattr(s, 'parallel', '?')}"
            peak = max((c["peak_bytes"] for c in getattr(s, "per_device", [])), default=s.peak_bytes)
            print(_line(name, label, n, s.makespan_us, base.makespan_us / s.makespan_us, s.extra.get("bubble"),
                        getattr(s, "comm_hidden", 0.0), peak), flush=True)


def _line(name: str, mode: str, n: int, us: float, speedup: float, bubble: float | None, hidden: float,
          peak: int) -> str:
    bub = "-" if bubble is None else f"{100 * bubble:.1f}%"
    return (f"{name:<22}{mode:<10}{n:>8}{us:>14,.1f}{speedup:>9.2f}x{bub:>9}{100 * hidden:>12.1f}%"
            f"{peak / 2**20:>13,.2f}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="one light model on 1 and 2 cards (CI smoke test)")
    ap.add_argument("--batch", type=int, default=8, help="batch of every model (default 8)")
    ap.add_argument("--system", help="system profile (default: the one of the ascend910 cards)")
    ap.add_argument("--compute", action="store_true",
                    help="compute the outputs too (the simulated numbers are the same, timing-only is faster)")
    args = ap.parse_args()
    counts = [1, 2] if args.quick else [1, 2, 4, 8]
    modes = list(MODES)
    print(f"{'model':<22}{'mode':<10}{'devices':>8}{'time (us)':>14}{'speedup':>10}{'bubble':>9}"
          f"{'comm hidden':>13}{'peak MiB/card':>14}")
    t0 = time.perf_counter()
    models = light_models(args.batch)
    if args.quick:
        models = [m for m in models if m[0] == "squeezenet"]
    for name, graph, feeds in models:
        rows(name, graph, feeds, counts, modes, args.system, args.compute)
    if not args.quick:
        enc = encoder(args.batch)
        if isinstance(enc, str):
            print(f"{ENCODER:<22}skipped, {enc}")
        else:
            rows(*enc, counts, modes, args.system, args.compute)
    print(f"speedup over one card running the whole batch {args.batch}; modes implemented: "
          f"{', '.join(implemented())}; {time.perf_counter() - t0:.0f} s host time")


if __name__ == "__main__":
    main()
