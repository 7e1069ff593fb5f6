"""How far a profile is from measurements it was not fitted to: every row of a whole-model
measurement CSV (default ``benchmarks/data/heldout_models.csv``) simulated on each profile
given, with the ratio simulated / measured time and the geomean error per profile.

Usage: python benchmarks/heldout.py [--csv FILE] [--models DIR] [--device P]... [--json]

The rows are kept apart from the ones any built-in or calibrated profile was fitted to
(``benchmarks/data/calibration_models.csv`` and ``fidelity_calibration.csv``); the models are
exported by ``benchmarks/heldout_export.py`` into ``--models``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))   # run from a checkout

from graphexec.calibrate import error, read_models_csv  # noqa: E402
from graphexec.calibrate.predict import simulate_all  # noqa: E402
from graphexec.calibrate.run import within  # noqa: E402
from graphexec.runtime.profiles import load_profile  # noqa: E402

CSV = ROOT / "benchmarks" / "data" / "heldout_models.csv"
MODELS = Path("~/.cache/graphexec/fidelity").expanduser()


def evaluate(csv: Path, models: Path, devices: list[Any]) -> dict[str, dict]:
    """Each device (a built-in name: its own rows; a .yaml path or a profile: every row)
    scored on the rows, keyed by the name or path given (a profile: its name)."""
    rows = read_models_csv(csv, models)
    out = {}
    for device in devices:
        profile = load_profile(device)
        every = not isinstance(device, str) or device.endswith((".yaml", ".yml"))
        mine = [m for m in rows if m.device == profile.name or every]
        sims = simulate_all(mine, profile)
        ratios = [s / m.measured_us for s, m in zip(sims, mine)]
        key = device if isinstance(device, str) else profile.name
        out[key] = {"rows": [{"label": m.label, "ratio": r} for m, r in zip(mine, ratios)],
                       "geomean_error": error(ratios), "within_25pct": within(ratios)}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--csv", type=Path, default=CSV)
    ap.add_argument("--models", type=Path, default=MODELS)
    ap.add_argument("--device", action="append", help="a profile name or .yaml (repeatable; default ascend310p)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    result = evaluate(args.csv, args.models, args.device or ["ascend310p"])
    if args.json:
        print(json.dumps(result, indent=1))
        return
    for device, r in result.items():
        print(f"{device}: {len(r['rows'])} rows, geomean error {r['geomean_error']:.2f}x, "
              f"{r['within_25pct']:.0%} within 25%")
        for row in r["rows"]:
            print(f"  {row['label']:<40}{row['ratio']:>7.2f}")


if __name__ == "__main__":
    main()
