"""``graphexec calibrate (--device P | --system S) --fit PATH[=LO:HI],... [--models-csv F]...
[--collectives F]... --out NEW.yaml``: fit a profile's parameters to measurements and write
the fitted profile (``graphexec/calibrate/``). It prints the error before and after per kind,
on the training rows and on the held-out rows; bad input is one line, exit 2."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from graphexec._files import check_output
from graphexec.calibrate import Target, calibrate, read_collective_table, read_models_csv, read_ops, write_profile
from graphexec.calibrate.fit import MAX_CONDITION, MIN_SENSITIVITY, conditioning
from graphexec.calibrate.run import HOLDOUT_EVERY, Calibration
from graphexec.cli.jsonout import emit
from graphexec.errors import CalibrationError


def fit_spec(text: str) -> dict[str, tuple[float, float] | None]:
    """'a.b,c.d=0.1:0.9' -> {'a.b': None, 'c.d': (0.1, 0.9)}."""
    out: dict[str, tuple[float, float] | None] = {}
    for item in (x.strip() for x in text.split(",") if x.strip()):
        path, eq, bounds = item.partition("=")
        if not eq:
            out[path] = None
            continue
        lo, colon, hi = bounds.partition(":")
        try:
            low, high = float(lo), float(hi)
        except ValueError:
            raise CalibrationError(f"--fit {item!r}: bounds are LOW:HIGH numbers, such as 0.1:1") from None
        if not colon or not 0 < low < high:
            raise CalibrationError(f"--fit {item!r}: bounds are LOW:HIGH with 0 < LOW < HIGH")
        out[path] = (low, high)
    return out


def cmd_calibrate(args: argparse.Namespace) -> int:
    if args.out:
        check_output(args.out, "--out")
        inputs = [*(args.models_csv or []), *(args.collectives or []), args.device or "", args.system or ""]
        if any(Path(f).resolve() == Path(args.out).resolve() for f in inputs if f):
            raise CalibrationError(f"--out {args.out}: is one of the files calibrate reads")
    target = Target.load(args.device, args.system)
    rows = [m for f in args.models_csv or [] for m in read_models_csv(f, args.models)]
    if bool(args.ops) != bool(args.ops_model):
        raise CalibrationError("--ops and --ops-model go together: the op table and the model it was measured on")
    ops_device = args.rows_device or target.device_profile.name
    rows += [m for f in args.ops or [] for m in read_ops(f, args.ops_model, args.ops_shapes or "", ops_device)]
    rows += [m for f in args.collectives or []
             for m in read_collective_table(f, args.collective, args.ranks, source=f)]
    fit: dict[str, tuple[float, float] | None] = {}
    for spec in args.fit:
        fit.update(fit_spec(spec))
    cal = calibrate(target, rows, fit, args.holdout_every, args.name, args.rows_device)
    if args.out:
        write_profile(cal, target.profile, args.out)
    if args.json:
        emit("calibrate", as_json(cal))
    else:
        print_report(cal, args.out)
    return 0


def as_json(cal: Calibration) -> dict[str, Any]:
    cond, least = conditioning(cal.jacobian)
    return {"target": cal.target, "iterations": cal.iterations, "ignored_rows": cal.ignored,
            "condition_number": cond, "least_sensitivity": least,
            "params": [{"path": p.path, "before": p.start, "after": cal.fitted[p.path], "lower": p.lower,
                        "upper": p.upper, "relative_sigma": cal.spread.get(p.path)} for p in cal.params],
            "summary": cal.summary(),
            "rows": [{"label": r.m.label, "kind": r.m.kind, "where": r.m.where, "held_out": r.held_out,
                      "measured_us": r.m.measured_us, "ratio_before": r.before, "ratio_after": r.after}
                     for r in cal.rows]}


def print_report(cal: Calibration, out: str | None) -> None:
    print(f"calibrated '{cal.target}': {len(cal.params)} parameter(s), {len(cal.rows)} rows "
          f"({sum(r.held_out for r in cal.rows)} held out), {cal.iterations} iteration(s)"
          + (f"; {cal.ignored} rows taken on other devices ignored" if cal.ignored else ""))
    cond, least = conditioning(cal.jacobian)
    print(f"  the training rows pin them: condition number {cond:.3g} (limit {MAX_CONDITION:g}), least "
          f"sensitivity {least:.3g} (limit {MIN_SENSITIVITY:g})")
    for p in cal.params:
        sigma = cal.spread.get(p.path, float("nan"))
        pm = f" +-{100 * sigma:.2g}%" if sigma == sigma else ""
        print(f"  {p.path:<44} {p.start:>12.4g} -> {cal.fitted[p.path]:<12.4g}{pm} "
              f"(bounds {p.lower:.3g}..{p.upper:.3g})")
    print(f"  {'rows (ratio = simulated / measured time)':<58}{'before':>8}{'after':>8}")
    for r in cal.rows:
        tag = " (held out)" if r.held_out else ""
        print(f"  {(r.m.label + tag)[:56]:<58}{r.before:>8.3f}{r.after:>8.3f}")
    for kind, splits in cal.summary().items():
        for split, s in splits.items():
            name = "in-sample" if split == "train" else "out-of-sample"
            print(f"{kind} {name}: {s['rows']:g} rows, geomean error {s['error_before']:.3f}x -> "
                  f"{s['error_after']:.3f}x, within 25% {s['within_25pct_before']:.0%} -> "
                  f"{s['within_25pct_after']:.0%}")
    if out:
        print(f"wrote {out}")


def register(sub: Any) -> None:
    """Add the ``calibrate`` command to the CLI's subparsers."""
    p = sub.add_parser("calibrate", help="fit a device or system profile's parameters to measured times")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--device", help="the device profile to fit: a built-in name or a .yaml")
    which.add_argument("--system", help="the system profile to fit (collective tables): a built-in name or a .yaml")
    p.add_argument("--fit", action="append", required=True, metavar="PATH[=LO:HI],...",
                   help="profile fields to fit, by dotted path (kernels.cube.efficiency.default, task_overhead_us, "
                        "collectives.fixed_us, ...), with optional bounds")
    p.add_argument("--models-csv", action="append", metavar="FILE.csv",
                   help="whole-model measurements: model, shapes, device, measured, unit[, streams, batch, source]")
    p.add_argument("--models", metavar="DIR", help="where the CSV's relative model paths are (default: its folder)")
    p.add_argument("--ops", action="append", metavar="OP_SUMMARY.csv|TRACE.json",
                   help="per-op measurements of one run on the device: an msprof op_summary (or its PROF_ folder) "
                        "or a kernel trace; each op is a row")
    p.add_argument("--ops-model", metavar="MODEL", help="the model --ops was measured on")
    p.add_argument("--ops-shapes", metavar="NAME=D1xD2...;...", help="its input shapes in that run")
    p.add_argument("--collectives", action="append", metavar="FILE.txt",
                   help="an nccl-tests or hccl_test output table (needs --system)")
    p.add_argument("--collective", choices=["all_reduce", "all_gather", "reduce_scatter", "broadcast"],
                   help="the collective the tables measured (default: from the table or its file name)")
    p.add_argument("--ranks", type=int, help="ranks of the collective tables (default: their 'Rank N' lines)")
    p.add_argument("--holdout-every", type=int, default=HOLDOUT_EVERY, metavar="N",
                   help=f"hold out every N-th row of each kind for the out-of-sample error (default {HOLDOUT_EVERY}; "
                        "0: none)")
    p.add_argument("--name", help="the fitted profile's name (default: the original's)")
    p.add_argument("--rows-device", metavar="NAME",
                   help="take the model rows measured on NAME (default: the profile's own name; e.g. refit a copy)")
    p.add_argument("--out", metavar="NEW.yaml", help="write the fitted profile here")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(fn=cmd_calibrate)
