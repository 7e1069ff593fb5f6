"""Where a profile's numbers come from, read off its ``sources:``: fitted (by ``graphexec
calibrate`` or by hand, "fitted: ..."), measured ("measured..."), assumed ("assumption: ...")
or cited (a datasheet, a whitepaper, the facts docs). A profile is calibrated when some of
its numbers were fitted; "against" names the measurement sets they were fitted to."""

from __future__ import annotations

import re
from typing import Mapping

KINDS = ("fitted", "measured", "cited", "assumed")
_FILE = re.compile(r"[\w./-]+\.(?:csv|txt|json|log)\b")


def kind_of(source: str) -> str:
    text = source.strip().lower()
    if text.startswith("fitted"):
        return "fitted"
    if text.startswith("measured"):
        return "measured"
    return "assumed" if text.startswith("assumption") else "cited"


def provenance(sources: Mapping[str, str]) -> dict[str, list[str]]:
    """Each kind -> the fields whose source is of that kind, in the profile's order."""
    out: dict[str, list[str]] = {k: [] for k in KINDS}
    for field, source in sources.items():
        out[kind_of(source)].append(field)
    return out


def against(sources: Mapping[str, str]) -> list[str]:
    """The measurement files (or, failing a file name, the first words) the fitted numbers name."""
    found: dict[str, None] = {}
    for source in sources.values():
        if kind_of(source) == "fitted":
            files = _FILE.findall(source)
            for f in files or [" ".join(source.split(":", 1)[1].split()[:6])]:
                found.setdefault(f, None)
    return list(found)


def note(sources: Mapping[str, str]) -> str:
    """One line for ``graphexec devices``: calibrated or not, against what, and the counts."""
    p = provenance(sources)
    counts = ", ".join(f"{len(p[k])} {k}" for k in KINDS)
    if not p["fitted"]:
        return f"not calibrated ({counts})"
    return f"calibrated: {', '.join(p['fitted'])} fitted against {'; '.join(against(sources))} ({counts})"
