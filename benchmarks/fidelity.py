"""How far graphexec's simulated times are from real hardware: every row of
``benchmarks/data/fidelity_calibration.csv`` reproduced from graphexec.

Usage: python benchmarks/fidelity.py [--json] [--kind KIND] [--models DIR] [--quick]

Each row is a published measurement (its source is in the CSV). For each, graphexec runs
what was measured: a copy through ``acl`` timed by events, a GEMM or a whole model in a
timing-only simulation (``Session.simulate``), a collective on a system profile. The
ratio is simulated time / measured time (for a rate, measured rate / simulated rate; for
a speedup, simulated / measured), so 1.0 is exact and 0.5 means twice too fast. Per kind
it prints the rows, the geomean error exp(mean |ln ratio|) and the share of rows within
25% (a ratio in 0.8-1.25), then one summary line. The torchvision models are exported by
``benchmarks/fidelity_export.py`` into ``--models`` (outside the repository).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import re
import subprocess
import sys
from functools import cache, partial
from pathlib import Path
from typing import Any, Callable

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))   # run from a checkout
sys.path.insert(0, str(ROOT / "benchmarks"))

import ios_schedule  # noqa: E402
from fidelity_export import DEFAULT_OUT, FILES  # noqa: E402
from ios_inception_v3 import inception_v3  # noqa: E402

import graphexec as gx  # noqa: E402
from graphexec import acl, hccl  # noqa: E402

CSV = ROOT / "benchmarks" / "data" / "fidelity_calibration.csv"
MiB, GiB = 1 << 20, 1 << 30
MODELS_DIR = DEFAULT_OUT
IOS_DEVICE = "nvidia-v100"


def _copy_us(kind: int, nbytes: int, *, system: str | None = None, profile: str = "ascend910") -> float:
    """A copy of ``nbytes`` through acl, timed by events around it on its stream (us)."""
    acl.init(system=system) if system else acl.init(profile=profile)
    try:
        acl.set_device(0)
        stream = acl.create_stream()
        src = acl.malloc_host(nbytes) if kind == acl.MEMCPY_HOST_TO_DEVICE else acl.malloc(nbytes)
        if system:   # card 0 -> card 1 over their link
            acl.device_enable_peer_access(1)
            acl.set_device(1)
            dst = acl.malloc(nbytes)
            acl.device_enable_peer_access(0)
            acl.set_device(0)
        else:
            dst = acl.malloc(nbytes)
        start, end = acl.create_event(), acl.create_event()
        acl.record_event(start, stream)
        acl.memcpy_async(dst, nbytes, src, nbytes, kind, stream)
        acl.record_event(end, stream)
        acl.synchronize_stream(stream)
        return acl.event_elapsed_time(start, end) * 1e3
    finally:
        acl.finalize()


def _gemm_us(n: int, device: str) -> float:
    b = gx.GraphBuilder("gemm")
    b.output(b.MatMul(b.input("a", "float32", [n, n]), b.input("b", "float32", [n, n])))
    return _makespan(b.build(), device, {"a": (n, n), "b": (n, n)})


def _makespan(graph: Any, device: str, shapes: dict[str, tuple[int, ...]], streams: int | str = 1) -> float:
    return float(gx.Session(graph, streams=streams, device=device).simulate(shapes=shapes).stats.makespan_us)


@cache
def _onnx(name: str) -> Any:
    path = MODELS_DIR / FILES[name]
    if not path.exists():
        print(f"exporting {name} (benchmarks/fidelity_export.py)...", file=sys.stderr)
        script = str(ROOT / "benchmarks" / "fidelity_export.py")
        subprocess.run([sys.executable, script, "--out", str(MODELS_DIR), name], check=True)
    return gx.load(path)


@cache
def _ios() -> Any:
    return inception_v3()


@cache
def _ios_us(batch: int) -> float:
    """IOS's sequential schedule: every kernel on one stream, no synchronize between them;
    timed in graph mode, which fuses each Conv with its Relu as IOS's cuDNN call does (the
    host issues ahead of the device, so its launches do not show)."""
    return _makespan(_ios(), IOS_DEVICE, {"data": (batch, 3, 299, 299)})


@cache
def _ios_schedule_us(batch: int, kind: str) -> float:
    """IOS's ``kind`` schedule ("greedy", "parallel" or "both") run as its runtime runs it
    (``benchmarks/ios_schedule.py``: stages, a device synchronize after each)."""
    graph = ios_schedule.typed(_ios(), batch)
    nodes, preds = ios_schedule.operators(graph)
    if kind == "greedy":
        return ios_schedule.run_schedule(graph, nodes, ios_schedule.greedy(preds), IOS_DEVICE)
    ops = ios_schedule.Ops(nodes, preds, *ios_schedule.solo_times(graph, nodes, IOS_DEVICE))
    sync = ios_schedule.round_trip_us(IOS_DEVICE)
    if kind == "parallel":
        return ios_schedule.run_schedule(graph, nodes, ios_schedule.ios_parallel(ops, sync), IOS_DEVICE)
    ops.merged_us = partial(ios_schedule.merged_conv_us, graph, nodes, device=IOS_DEVICE)
    schedule, merged = ios_schedule.ios_both(ops, sync)
    return ios_schedule.run_schedule(graph, nodes, schedule, IOS_DEVICE, merged)


def _all_reduce_us(nbytes: int, ranks: int, system: str) -> float:
    return hccl.collective_us("all_reduce", nbytes, system, list(range(ranks)))


# ---- one function per kind of row: (configuration) -> simulated value in the row's unit ----
def _bandwidth(conf: str) -> float:
    if m := re.match(r"910B H2D memcpy (\d+) MiB", conf):
        n = int(m[1]) * MiB
        return n / _copy_us(acl.MEMCPY_HOST_TO_DEVICE, n, profile="ascend910b") / 1e3
    if m := re.match(r"910B peer copy card0->card1 (\d+) MiB", conf):
        n = int(m[1]) * MiB
        return n / _copy_us(acl.MEMCPY_DEVICE_TO_DEVICE, n, system="atlas800t-a2") / 1e3
    if conf.startswith("A100-40GB SXM HBM read+write"):   # a device copy reads and writes each byte
        n = 256 * MiB
        return 2 * n / _copy_us(acl.MEMCPY_DEVICE_TO_DEVICE, n, profile="nvidia-a100") / 1e3
    raise ValueError(conf)


def _roofline(conf: str) -> float:
    m = re.match(r"FP32 GEMM (\d+)\^3", conf)
    if not m:
        raise ValueError(conf)
    n = int(m[1])
    return 2.0 * n ** 3 / _gemm_us(n, "nvidia-a100") / 1e6


def _model_310p(conf: str) -> float:
    m = re.match(r"(\w+) bs(\d+) fp16", conf)
    if not m:
        raise ValueError(conf)
    batch = int(m[2])
    return batch / _makespan(_onnx(m[1]), "ascend310p", {"input": (batch, 3, 224, 224)}) * 1e6


def _model_v100(conf: str) -> float:
    m = re.match(r"IOS Inception V3 bs(\d+) fp32 sequential", conf)
    if not m:
        raise ValueError(conf)
    return _ios_us(int(m[1])) / 1e3


def _multi_stream(conf: str) -> float:
    """IOS's speedup over its sequential schedule: the greedy row runs the wavefront
    schedule, IOS-Parallel IOS's dynamic program over concurrent stages, IOS-Both the same
    with merged convolutions too."""
    m = re.match(r"Inception V3 bs(\d+) V100", conf)
    if not m:
        raise ValueError(conf)
    batch = int(m[1])
    kind = "greedy" if "greedy" in conf else "both" if "IOS-Both" in conf else "parallel"
    return _ios_us(batch) / _ios_schedule_us(batch, kind)


def _collective(conf: str) -> float:
    if m := re.match(r"(\d+)xA100 \(DGX A100, NVSwitch\) allreduce (\d+) GiB", conf):
        p, n = int(m[1]), int(m[2]) * GiB
        return n / _all_reduce_us(n, p, "dgx-a100") / 1e3 * 2 * (p - 1) / p   # bus bandwidth, GB/s
    if m := re.match(r"(\d+)xA100 allreduce (\d+) B latency", conf):
        return _all_reduce_us(int(m[2]), int(m[1]), "dgx-a100")
    raise ValueError(conf)


KINDS: dict[str, Callable[[str], float]] = {
    "bandwidth": _bandwidth, "roofline": _roofline, "model-310P": _model_310p, "model-V100": _model_v100,
    "multi-stream": _multi_stream, "collective": _collective}
RATES = {"fps", "GB/s", "TFLOPS"}   # higher is faster: the time ratio is measured / simulated


def ratio(simulated: float, measured: float, unit: str) -> float:
    """Simulated time over measured time (a speedup: simulated over measured)."""
    return measured / simulated if unit in RATES else simulated / measured


def error(ratios: list[float]) -> float:
    """Geomean error: exp(mean |ln r|), 1.0 when every row is exact."""
    return math.exp(sum(abs(math.log(r)) for r in ratios) / len(ratios)) if ratios else float("nan")


def _quick(row: dict[str, str]) -> bool:
    """The rows --quick keeps: no torchvision model (no export), no batch above 16."""
    batch = re.search(r"bs(\d+)", row["configuration"])
    return row["kind"] != "model-310P" and (batch is None or int(batch[1]) <= 16)


def run(kinds: set[str] | None = None, quick: bool = False) -> list[dict[str, Any]]:
    rows = []
    with CSV.open(newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            if (kinds and row["kind"] not in kinds) or (quick and not _quick(row)):
                continue
            sim = KINDS[row["kind"]](row["configuration"])
            measured = float(row["measured"])
            rows.append({**row, "measured": measured, "simulated": sim, "ratio": ratio(sim, measured, row["unit"])})
    return rows


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    by_kind: dict[str, Any] = {}
    for kind in dict.fromkeys(r["kind"] for r in rows):
        rs = [r["ratio"] for r in rows if r["kind"] == kind]
        by_kind[kind] = {"rows": len(rs), "geomean_error": error(rs), "min_ratio": min(rs), "max_ratio": max(rs),
                         "within_25pct": sum(0.8 <= r <= 1.25 for r in rs) / len(rs)}
    all_r = [r["ratio"] for r in rows]
    return {"kinds": by_kind, "rows": len(rows), "geomean_error": error(all_r), "goals": goals(rows),
            "within_25pct": sum(0.8 <= r <= 1.25 for r in all_r) / max(len(all_r), 1)}


def goals(rows: list[dict[str, Any]]) -> dict[str, bool | None]:
    """Issue 33's goals on these rows (None where --kind or --quick left their rows out)."""
    def of(kind: str, match: str = "") -> list[float]:
        return [r["ratio"] for r in rows if r["kind"] == kind and match in r["configuration"]]

    p310, v100, ms, coll = of("model-310P"), of("model-V100", "bs1 "), of("multi-stream", "IOS-Parallel"), \
        of("collective")
    return {"310P geomean <= 1.25x, 80% within 25%":
            (error(p310) <= 1.25 and sum(0.8 <= r <= 1.25 for r in p310) >= 0.8 * len(p310)) if p310 else None,
            "V100 Inception V3 bs1 in 0.7-1.4": all(0.7 <= r <= 1.4 for r in v100) if v100 else None,
            "multi-stream bs1 within 10%": all(abs(r - 1) <= 0.10 for r in ms) if ms else None,
            "A100 all-reduce within 15%": all(abs(r - 1) <= 0.15 for r in coll) if coll else None}


def _print(rows: list[dict[str, Any]], s: dict[str, Any]) -> None:
    print(f"{'kind / configuration':<64}{'simulated':>10}{'measured':>10} {'unit':<7}{'ratio':>6}")
    for kind, k in s["kinds"].items():
        print(f"{kind}: {k['rows']} rows, geomean error {k['geomean_error']:.2f}x, "
              f"{k['within_25pct']:.0%} within 25%, ratio {k['min_ratio']:.2f}-{k['max_ratio']:.2f}")
        for r in (r for r in rows if r["kind"] == kind):
            print(f"  {r['configuration'][:62]:<62}{r['simulated']:>10.4g}{r['measured']:>10.4g} "
                  f"{r['unit']:<7}{r['ratio']:>6.2f}")
    met = {"True": "met", "False": "NOT met", "None": "not run"}
    print("goals: " + "; ".join(f"{k}: {met[str(v)]}" for k, v in s["goals"].items()))
    print(f"summary: {s['rows']} rows, geomean error {s['geomean_error']:.2f}x, {s['within_25pct']:.0%} within 25%; "
          + ", ".join(f"{k} {v['geomean_error']:.2f}x" for k, v in s["kinds"].items()))


def main() -> None:
    global MODELS_DIR
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="rows and summary as JSON on stdout")
    ap.add_argument("--kind", action="append", help="only rows of this kind (repeatable)")
    ap.add_argument("--models", type=Path, default=DEFAULT_OUT, help="where the exported ONNX models are cached")
    ap.add_argument("--quick", action="store_true", help="no torchvision model, batches up to 16 (CI smoke test)")
    args = ap.parse_args()
    MODELS_DIR = args.models
    np.seterr(all="ignore")
    rows = run(set(args.kind) if args.kind else None, args.quick)
    s = summary(rows)
    if args.json:
        json.dump({"rows": rows, "summary": s}, sys.stdout, indent=1)
        print()
    else:
        _print(rows, s)


if __name__ == "__main__":
    main()
