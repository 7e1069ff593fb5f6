"""Host wall time of Session.run against onnxruntime (one intra-op thread), light models.

Usage: python benchmarks/host_speed.py [--repeat N] [--threads N] [--quick] [--only NAME,...] [--best] [--cpu]
       [--real [FAMILY|all]] [--first [FAMILY|all]]
Both run the same input (the declared shapes' default feeds) in the same process,
alternating, after a warm-up; the table gives the median of each and their ratio, then
the geometric mean of ratios and the worst one against the targets. ``--best`` takes the
fastest run of each instead of the median: on a machine that other work shares (a load of
5 on 2 cores moved single ratios by 2x between runs), the runs nothing interrupted. ``--cpu``
times each run by the process's CPU time instead of the wall clock: on such a machine a run
that is descheduled waits without using CPU, and a longer run is descheduled more often
(a load of 6: graphexec's 14 ms of CPU took 32 ms of wall time where onnxruntime's 3 ms
took 3 ms), so CPU time is the fairer measure there. Both libraries run on the calling
thread here (one BLAS thread, one intra-op thread), so it counts the same work.

--real runs the published models of tests/real_models.py instead (fetched into the model
cache on first use): those of the transformer and quantized families, or of FAMILY
(``all``: every one), on the feeds the e2e test uses; a model that cannot be fetched or that
graphexec cannot run gets a line saying why; the geometric mean is given per family.

--first times what a user waits for before the first result, on the same models:
gx.load + Session + the first run against onnxruntime's InferenceSession creation + its
first run, each from the file, alternating; the median is taken after one round per model
whose times are printed apart ("cold": the first model's includes each library's imports and
one-time tables, every model's the OS file cache).

Targets (issue 20, round two): light models 1.25x geometric mean, none beyond 2x; the
transformer family 1.5x; the first run of a transformer encoder 3x.
"""

from __future__ import annotations

import os

# one BLAS thread, like onnxruntime's one intra-op thread (must be set before numpy loads)
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse
import glob
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import onnx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # run from a checkout

import graphexec as gx  # noqa: E402

LIGHT = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
TARGET_GEO, TARGET_MAX = 1.25, 2.0     # light models: geometric mean, worst
TARGET_FAMILY = {"transformer": 1.5}   # --real: geometric mean per family
TARGET_FIRST = 3.0                     # --first: transformer encoders


def _ort_session(path: str):
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3   # errors only: some published models declare output shapes they do not produce
    return ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])


def _alternating_ms(fns: list, repeat: int) -> list[float]:
    """Median wall ms of each function, called in turn ``repeat`` times (noise hits both)."""
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeat):
        for fn, out in zip(fns, times):
            t0 = _STAT["clock"]()
            fn()
            out.append((_STAT["clock"]() - t0) * 1e3)
    return [_STAT["of"](t) for t in times]


_STAT: dict[str, Any] = {"of": statistics.median, "clock": time.perf_counter}   # --best: min; --cpu: process_time


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--threads", type=int, default=1, help="Session(threads=N) (onnxruntime keeps one thread)")
    ap.add_argument("--quick", action="store_true", help="one small model, one repeat (CI smoke test)")
    ap.add_argument("--only", metavar="NAME,...", help="only the models whose name contains one of these")
    ap.add_argument("--best", action="store_true", help="the fastest of the alternating runs, not the median")
    ap.add_argument("--cpu", action="store_true", help="process CPU time per run, not wall time (a shared machine)")
    ap.add_argument("--real", nargs="?", const=",".join(REAL_DEFAULT), metavar="FAMILY",
                    help=f"the published models of tests/real_models.py (default families: {', '.join(REAL_DEFAULT)}; "
                         "'all': every one)")
    ap.add_argument("--first", nargs="?", const=",".join(REAL_DEFAULT), metavar="FAMILY",
                    help="load + compile + first run of those models against onnxruntime's session creation + "
                         "first run")
    args = ap.parse_args()
    if args.best:
        _STAT["of"] = min
    if args.cpu:
        _STAT["clock"] = time.process_time
    if args.first is not None:
        first(args)
        return
    if args.real is not None:
        real(args)
        return
    paths = sorted(glob.glob(os.path.join(LIGHT, "*.onnx")))
    if args.quick:
        paths, args.repeat = [p for p in paths if "squeezenet" in p], 1
    if args.only:
        paths = [p for p in paths if any(k in os.path.basename(p) for k in args.only.split(","))]
    print(f"{'model':<14}{'graphexec ms':>14}{'onnxruntime ms':>16}{'ratio':>8}")
    ratios = []
    for path in paths:
        graph = gx.load(path)
        feeds = gx.default_feeds(graph)
        session = gx.Session(graph, threads=args.threads)
        ort = _ort_session(path)
        session.run(feeds)
        ort.run(None, feeds)  # warm-up: compile, caches
        ours, theirs = _alternating_ms([lambda s=session, f=feeds: s.run(f), lambda o=ort, f=feeds: o.run(None, f)],
                                       args.repeat)
        ratios.append(ours / theirs)
        print(f"{os.path.basename(path)[6:-5]:<14}{ours:>14.1f}{theirs:>16.1f}{ours / theirs:>8.2f}", flush=True)
    geo = float(np.exp(np.mean(np.log(ratios))))
    print(f"geometric mean ratio: {geo:.2f}x (graphexec / onnxruntime); worst {max(ratios):.2f}x "
          f"(targets: {TARGET_GEO}x, none beyond {TARGET_MAX:.0f}x)")
    print(_blas_line())


REAL_DEFAULT = ("transformer", "quantized")


def _chosen(spec: str, quick: bool, only: str | None = None) -> tuple[Any, list[str], list[Any]]:
    """(the real_models module, the families of ``spec``, their entries)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    import real_models as rm

    families = list(rm.FAMILIES) if spec == "all" else spec.split(",")
    for f in families:
        if f not in rm.FAMILIES:
            sys.exit(f"unknown family {f!r}; families are: {', '.join(rm.FAMILIES)} (or all)")
    chosen = [e for e in rm.MANIFEST if set(e.families) & set(families)]
    if only:
        chosen = [e for e in chosen if any(k in e.name for k in only.split(","))]
    if quick:
        chosen = [e for e in chosen if e.name == "tashkeel_rawi_int8"]
    return rm, families, chosen


def _fetched(rm: Any, families: list[str], chosen: list[Any]) -> Iterator[tuple[Any, str, Path, dict]]:
    """(entry, its families among ``families``, its file, its feeds) of each model that could
    be fetched; a line saying why for each that could not."""
    for entry in chosen:
        path = rm.fetch(entry)
        if path is None:
            print(f"{entry.name:<28}{'not fetched: ' + rm.fetch_reason(entry)}", flush=True)
            continue
        yield entry, ",".join(f for f in entry.families if f in families), path, rm.make_feeds(entry, path)


def _geomeans(ratios: dict[str, list[float]], targets: dict[str, float]) -> None:
    for f, rs in ratios.items():
        if rs:
            geo = float(np.exp(np.mean(np.log(rs))))
            goal = f" (target {targets[f]}x)" if f in targets else ""
            print(f"{f}: geometric mean ratio {geo:.2f}x over {len(rs)} models (graphexec / onnxruntime); "
                  f"worst {max(rs):.2f}x{goal}")


def real(args: argparse.Namespace) -> None:
    """The table over the published models of ``tests/real_models.py``, geometric mean per family."""
    rm, families, chosen = _chosen(args.real, args.quick, args.only)
    if args.quick:
        args.repeat = 1
    print(f"{'model':<28}{'graphexec ms':>14}{'onnxruntime ms':>16}{'ratio':>8}  families")
    ratios: dict[str, list[float]] = {f: [] for f in families}
    for entry, tags, path, feeds in _fetched(rm, families, chosen):
        ort = _ort_session(str(path))
        try:
            session = gx.Session(gx.load(str(path)), threads=args.threads)
            session.run(feeds)
        except Exception as e:  # noqa: BLE001 - the table says which model graphexec cannot run, and why
            theirs = _alternating_ms([lambda o=ort, f=feeds: o.run(None, f)], max(1, args.repeat))[0]
            line = (str(e).strip().splitlines() or [""])[0].removeprefix(f"{path}: ")
            print(f"{entry.name:<28}{'FAIL':>14}{theirs:>16.2f}{'-':>8}  {tags}  {type(e).__name__}: {line[:120]}",
                  flush=True)
            continue
        ort.run(None, feeds)  # warm-up: compile, caches
        ours, theirs = _alternating_ms([lambda s=session, f=feeds: s.run(f), lambda o=ort, f=feeds: o.run(None, f)],
                                       args.repeat)
        for f in entry.families:
            if f in ratios:
                ratios[f].append(ours / theirs)
        print(f"{entry.name:<28}{ours:>14.2f}{theirs:>16.2f}{ours / theirs:>8.2f}  {tags}", flush=True)
    _geomeans(ratios, TARGET_FAMILY)
    print(_blas_line())


def first(args: argparse.Namespace) -> None:
    """The table of first-run times (load, compile, run once) over the published models."""
    rm, families, chosen = _chosen(args.first, args.quick, args.only)
    repeat = 1 if args.quick else max(1, min(args.repeat, 5))
    print(f"{'model':<28}{'graphexec ms':>14}{'onnxruntime ms':>16}{'ratio':>8}{'cold ms: ours':>15}{'ort':>8}  "
          "families  (load + first run)")
    ratios: dict[str, list[float]] = {f: [] for f in families}
    for entry, tags, path, feeds in _fetched(rm, families, chosen):

        def ours(p: str = str(path), f: dict = feeds) -> None:
            gx.Session(gx.load(p), threads=args.threads).run(f)

        def theirs(p: str = str(path), f: dict = feeds) -> None:
            _ort_session(p).run(None, f)

        try:
            cold_ours = _alternating_ms([ours], 1)[0]
        except Exception as e:  # noqa: BLE001 - the table says which model graphexec cannot run, and why
            print(f"{entry.name:<28}{'FAIL':>14}  {type(e).__name__}: {str(e).strip()[:120]}", flush=True)
            continue
        cold_theirs = _alternating_ms([theirs], 1)[0]
        a, b = _alternating_ms([ours, theirs], repeat)
        for f in entry.families:
            if f in ratios:
                ratios[f].append(a / b)
        print(f"{entry.name:<28}{a:>14.1f}{b:>16.1f}{a / b:>8.2f}{cold_ours:>15.1f}{cold_theirs:>8.1f}  {tags}",
              flush=True)
    _geomeans(ratios, {"transformer": TARGET_FIRST})
    print(_blas_line())


def _blas_line() -> str:
    """Which GEMM kernels numpy ran: onnxruntime's MLAS picks its own for the CPU, while an
    OPENBLAS_CORETYPE in the environment pins OpenBLAS (e.g. to AVX2 on an AVX-512 CPU,
    about half the GEMM speed), so a ratio means little without this line."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        arch = "unknown kernels (pip install threadpoolctl to see them)"
    else:
        blas = [i for i in threadpool_info() if i.get("user_api") == "blas"]
        arch = ", ".join(f"{i['internal_api']} {i.get('version')} {i.get('architecture')} kernels" for i in blas)
    line = f"numpy BLAS: {arch or 'none found'}"
    core = os.environ.get("OPENBLAS_CORETYPE")
    if core:
        line += (f"\nnote: OPENBLAS_CORETYPE={core} pins those kernels; onnxruntime is not pinned. For like "
                 "kernels: env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/host_speed.py")
    return line


if __name__ == "__main__":
    main()
