"""Host time of LLM decode steps with past key values, and of a scripted greedy Loop, against onnxruntime.

Usage: OPENBLAS_NUM_THREADS=1 python benchmarks/decode_speed.py [--repeat N] [--past P] [--steps N]
       [--only NAME,...] [--quick] [--profile NAME]

Models: ``models/gpt2_decoder.onnx`` (committed) and the exporter-written decoders of
``benchmarks/decode_corpus.py`` in ``~/.cache/graphexec/decode`` (GPT-2, Llama, Qwen2 with 4
layers; run that script first, with torch and transformers, else they are skipped with a
line saying so), and ``models/scripted_greedy_loop.onnx`` (a Loop carrying a sequence).

Three tables, graphexec beside onnxruntime (one intra-op thread) in the same process:

- **step**: one decode step (one new token, a past of ``--past`` positions) run again and
  again on the same feeds, alternating, after a warm-up: the session's steady state;
- **loop**: a decode loop as a user writes it, ``--steps`` steps whose past grows by one each
  step, every step's feeds a new input-shape signature (graphexec compiles a plan per
  signature: the first-run path);
- **greedy**: the scripted greedy-decoding Loop at 6 and 24 steps (control flow carrying a
  sequence).

Times are the median CPU ms of this process (``time.process_time``; ``--best``: the fastest)
of alternating runs: both run on this one thread, so on a quiet machine that is the wall time,
and on a shared one it leaves out the other processes' turns. The ratio is Target (issue 35): decode steps <= 2x.
``--profile NAME`` prints cProfile's top of the steady-state step of that model instead.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
import onnx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))   # run from a checkout

import graphexec as gx  # noqa: E402

CACHE = Path(os.environ.get("GRAPHEXEC_DECODE_CACHE", Path.home() / ".cache" / "graphexec" / "decode"))
CORPUS = ("gpt2_decode", "llama_decode", "qwen2_decode")
TARGET = 2.0
_STAT: dict[str, Callable[[list[float]], float]] = {"of": statistics.median}


def _ort(path: str) -> Any:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = opts.inter_op_num_threads = 1
    return ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])


def _ms(fns: list[Callable[[], Any]], repeat: int) -> list[float]:
    """Each function's ms (median, or the fastest with --best), called in turn ``repeat`` times."""
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeat):
        for fn, out in zip(fns, times):
            t0 = time.process_time()
            fn()
            out.append((time.process_time() - t0) * 1e3)
    return [_STAT["of"](t) for t in times]


def models(only: str | None) -> list[tuple[str, Path | None]]:
    """(name, file or None when the corpus has not been exported)."""
    out: list[tuple[str, Path | None]] = [("gpt2_decoder", ROOT / "models" / "gpt2_decoder.onnx")]
    for name in CORPUS:
        path = CACHE / f"{name}.onnx"
        out.append((name, path if path.exists() else None))
    return [m for m in out if not only or any(k in m[0] for k in only.split(","))]


def step_feeds(path: Path, past: int, token: int = 5) -> dict[str, np.ndarray]:
    """One new token after ``past`` positions: ids, positions, the cache (seeded random)."""
    feeds: dict[str, np.ndarray] = {}
    rng = np.random.default_rng(0)
    for inp in onnx.load(str(path), load_external_data=False).graph.input:
        dims = [d.dim_value or None for d in inp.type.tensor_type.shape.dim]
        if inp.name.startswith("past_key_values."):
            shape = [1, dims[1], past, dims[3]]
            feeds[inp.name] = rng.standard_normal(shape).astype(np.float32)
        elif inp.name == "input_ids":
            feeds[inp.name] = np.array([[token]], dtype=np.int64)
        elif inp.name == "position_ids":
            feeds[inp.name] = np.array([[past]], dtype=np.int64)
        elif inp.name == "attention_mask":
            feeds[inp.name] = np.ones((1, past + 1), dtype=np.int64)
        else:
            raise SystemExit(f"{path}: input {inp.name!r} is not a decoder's")
    return feeds


def step_table(chosen: list[tuple[str, Path | None]], past: int, repeat: int) -> list[float]:
    print(f"step: one token after a past of {past}, the same feeds each run")
    print(f"{'model':<16}{'tasks':>7}{'graphexec ms':>14}{'onnxruntime ms':>16}{'ratio':>8}  outputs")
    ratios = []
    for name, path in chosen:
        if path is None:
            print(f"{name:<16}not exported: run benchmarks/decode_corpus.py (torch, transformers)")
            continue
        feeds = step_feeds(path, past)
        session, ort = gx.Session(gx.load(str(path))), _ort(str(path))
        res, want = session.run(feeds), ort.run(None, feeds)
        ok = all(np.allclose(g, w, rtol=1e-4, atol=1e-4) for g, w in zip(res.outputs.values(), want))
        ours, theirs = _ms([lambda s=session, f=feeds: s.run(f), lambda o=ort, f=feeds: o.run(None, f)], repeat)
        ratios.append(ours / theirs)
        print(f"{name:<16}{res.stats.num_tasks:>7}{ours:>14.3f}{theirs:>16.3f}{ours / theirs:>8.2f}  "
              f"{'equal' if ok else 'DIFFER'}", flush=True)
    return ratios


def loop_table(chosen: list[tuple[str, Path | None]], past: int, steps: int) -> list[float]:
    print(f"loop: {steps} steps from a past of {past}, the past one longer each step (a new signature each)")
    print(f"{'model':<16}{'graphexec ms/step':>19}{'onnxruntime ms/step':>21}{'ratio':>8}")
    ratios = []
    for name, path in chosen:
        if path is None:
            continue
        session, ort = gx.Session(gx.load(str(path))), _ort(str(path))
        session.run(step_feeds(path, past - 1))
        ort.run(None, step_feeds(path, past - 1))   # warm-up: imports, one-time tables
        all_feeds = [step_feeds(path, past + i) for i in range(steps)]
        t0 = time.process_time()
        for f in all_feeds:
            session.run(f)
        ours = (time.process_time() - t0) * 1e3 / steps
        t0 = time.process_time()
        for f in all_feeds:
            ort.run(None, f)
        theirs = (time.process_time() - t0) * 1e3 / steps
        ratios.append(ours / theirs)
        print(f"{name:<16}{ours:>19.2f}{theirs:>21.3f}{ours / theirs:>8.1f}", flush=True)
    return ratios


def greedy_table(repeat: int) -> None:
    path = ROOT / "models" / "scripted_greedy_loop.onnx"
    print("greedy: models/scripted_greedy_loop.onnx, a Loop carrying a sequence of tokens")
    print(f"{'steps':<16}{'graphexec ms':>14}{'onnxruntime ms':>16}{'ratio':>8}  outputs")
    session, ort = gx.Session(gx.load(str(path))), _ort(str(path))
    h = np.random.default_rng(0).standard_normal((2, 8)).astype(np.float32)
    for n in (6, 24):
        feeds = {"h": h, "steps": np.array(n, dtype=np.int64)}
        got, want = session.run(feeds).outputs["tokens"], ort.run(None, feeds)[0]
        ours, theirs = _ms([lambda f=feeds: session.run(f), lambda f=feeds: ort.run(None, f)], repeat)
        print(f"{n:<16}{ours:>14.3f}{theirs:>16.3f}{ours / theirs:>8.1f}  "
              f"{'equal' if np.array_equal(got, want) else 'DIFFER'}", flush=True)


def profile(name: str, past: int) -> None:
    import cProfile
    import pstats

    path = dict(models(None)).get(name)
    if path is None:
        raise SystemExit(f"no model {name!r} (or not exported)")
    feeds = step_feeds(path, past)
    session = gx.Session(gx.load(str(path)))
    session.run(feeds)
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(200):
        session.run(feeds)
    prof.disable()
    pstats.Stats(prof).sort_stats("tottime").print_stats(15)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=200)
    ap.add_argument("--past", type=int, default=16)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--only", metavar="NAME,...")
    ap.add_argument("--best", action="store_true", help="the fastest of the alternating runs, not the median")
    ap.add_argument("--quick", action="store_true", help="the committed GPT-2 only, few repeats")
    ap.add_argument("--profile", metavar="NAME")
    args = ap.parse_args(argv)
    if args.best:
        _STAT["of"] = min
    if args.profile:
        profile(args.profile, args.past)
        return 0
    chosen = models("gpt2_decoder" if args.quick else args.only)
    repeat = 5 if args.quick else args.repeat
    ratios = step_table(chosen, args.past, repeat)
    if ratios:
        geo = float(np.exp(np.mean(np.log(ratios))))
        print(f"step: geometric mean {geo:.2f}x, worst {max(ratios):.2f}x (target <= {TARGET:.0f}x)")
    loop_table(chosen, args.past, 2 if args.quick else args.steps)
    greedy_table(repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
