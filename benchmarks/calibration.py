"""The calibration figures of README's "How accurate is it", recomputed on this checkout:
``graphexec calibrate`` on the 310P rows (the two numbers part 1 assumed, refit from those
assumptions; every 5th row held out), the assumed and the fitted profile scored on the held-out
models, and the DGX H100's link latency fit to the H20 nccl-tests table. The built-in ascend310p
ships the fitted values (its sources say so).

Usage: python benchmarks/calibration.py [--quick] [--models DIR] [--write-profile PATH]

--quick runs the collective part only (no exported model needed); --write-profile writes the
fitted 310P profile (as the built-in's fitted numbers and sources were written).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))   # run from a checkout
sys.path.insert(0, str(ROOT / "benchmarks"))

from heldout import CSV as HELDOUT  # noqa: E402
from heldout import MODELS, evaluate  # noqa: E402

from graphexec.calibrate import Target, calibrate, read_collective_table, read_models_csv, write_profile  # noqa: E402
from graphexec.calibrate.predict import simulated_us  # noqa: E402
from graphexec.runtime.profiles import load_profile  # noqa: E402
from graphexec.runtime.systems import load_system  # noqa: E402

DATA = Path("benchmarks") / "data"   # relative: the fitted sources name the repository's files
FIT_310P = {"kernels.cube.efficiency.default": None, "kernels.l2_bytes": None}
ASSUMED_310P = {"kernels.cube.efficiency.default": 0.8, "kernels.l2_bytes": 16 * 2**20}   # part 1's, the fit's start


def _line(what: str, split: str, s: dict) -> str:
    return (f"{what:<34}{split:<14}{s['rows']:>5} {s['error_before']:>8.3f}x {s['error_after']:>8.3f}x "
            f"{s['within_25pct_before']:>6.0%} {s['within_25pct_after']:>6.0%}")


LATENCY = "topology.intra_group.latency_us"
PIPE = ("collectives.fixed_us", "collectives.efficiency", "collectives.slice_bytes")
ASSUMED_DGX_H100 = {LATENCY: 2.0, PIPE[0]: 6.14, PIPE[1]: 0.822, PIPE[2]: 524288}   # before any H20 table


def h20_rows() -> tuple[list, list]:
    """The two 8 x H20 all-reduce tables: 4 B-4 KiB (DeepEP #303), 32 KiB-1 GiB (Mooncake #3484)."""
    folder = DATA / "collectives"
    return (read_collective_table(folder / "hgx-h20_all_reduce_perf_8gpu.txt", "all_reduce", 8),
            read_collective_table(folder / "hgx-h20_all_reduce_perf_8gpu_32k-1g.txt", "all_reduce", 8))


def collectives(detail: bool = True) -> list[str]:
    """The link latency on the small table alone (collinear with the fixed cost, so fitted
    first, on the rows it dominates), then the fixed cost, the links' payload share and the
    pipeline slice on both tables; each row's ratio before and after, 1 KiB-1 GiB marked."""
    small, big = h20_rows()
    start = Target(load_system("dgx-h100")).build(ASSUMED_DGX_H100)
    first = calibrate(Target(start), small, {LATENCY: None})
    cal = calibrate(Target(first.profile), small + big, {p: None for p in PIPE})
    out = [f"dgx-h100 {p.path} {p.start:g} -> {first.fitted[p.path] if p.path == LATENCY else cal.fitted[p.path]:g}"
           for p in first.params + cal.params]
    out += [_line("H20 4 B-4 KiB, latency alone", split, s) for split, s in first.summary()["collective"].items()]
    out += [_line("H20 4 B-1 GiB, the other three", split, s) for split, s in cal.summary()["collective"].items()]
    if detail:
        out.append("  all_reduce size, 8 ranks      ratio: all assumed, latency fitted, all fitted")
        out += [f"  {r.m.nbytes:>12} B {'held out' if r.held_out else '':<9}"
                f"{simulated_us(r.m, start) / r.m.measured_us:>7.3f} "
                f"{r.before:>7.3f} {r.after:>7.3f}{'' if 1024 <= r.m.nbytes <= 2**30 else '   (outside 1 KiB-1 GiB)'}"
                for r in cal.rows]
    return out


def models(folder: Path, write: Path | None) -> list[str]:
    rows = read_models_csv(DATA / "calibration_models.csv", folder)
    assumed = Target(load_profile("ascend310p")).build(ASSUMED_310P).model_copy(update={"name": "ascend310p-assumed"})
    cal = calibrate(Target(assumed), rows, FIT_310P, name="ascend310p", rows_device="ascend310p")
    out = [f"ascend310p {p.path} {p.start:g} -> {cal.fitted[p.path]:g}" for p in cal.params]
    out += [_line("310P calibration_models.csv", split, s) for split, s in cal.summary()["model"].items()]
    if write is not None:
        write_profile(cal, assumed, write)
        scored = evaluate(HELDOUT, folder, [assumed, "ascend310p", str(write)])
        out += [f"{Path(d).name:<34}{'other models':<14}{len(r['rows']):>5} {r['geomean_error']:>8.3f}x "
                f"{'':>9} {r['within_25pct']:>6.0%}" for d, r in scored.items()]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the collective fit only (no exported model needed)")
    ap.add_argument("--models", type=Path, default=MODELS)
    ap.add_argument("--write-profile", type=Path, help="write the fitted 310P profile here (and score it)")
    args = ap.parse_args()
    os.chdir(ROOT)
    print(f"{'rows':<34}{'split':<14}{'n':>5} {'before':>9} {'after':>9} {'25%':>6} {'25%':>6}")
    for line in collectives() + ([] if args.quick else models(args.models, args.write_profile)):
        print(line)


if __name__ == "__main__":
    main()
