"""Write a calibrated profile as YAML that ``--device FILE`` / ``--system FILE`` read back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from graphexec._files import write_one
from graphexec.calibrate.run import Calibration
from graphexec.runtime.systems import SystemProfile


def profile_yaml(cal: Calibration, original: Any) -> str:
    """The fitted profile as YAML text, a header saying what was fitted to what."""
    data = cal.profile.model_dump()
    if isinstance(cal.profile, SystemProfile) and not any(p.path.startswith("device.") for p in cal.params):
        data["device"] = original.device if isinstance(original.device, str) else data["device"]
    head = (f"# {data['name']}: '{cal.target}' with {len(cal.params)} parameter(s) fitted by graphexec calibrate\n"
            f"# to {len(cal.rows)} measured rows ({sum(r.held_out for r in cal.rows)} held out); "
            "each fitted number's source says which rows.\n")
    return head + yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=4096)


def write_profile(cal: Calibration, original: Any, path: str | Path) -> None:
    text = profile_yaml(cal, original)
    write_one(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))
