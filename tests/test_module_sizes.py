"""Keep modules small (style.md: aim under 300 lines; this check fails past 400)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIMIT = 400


def test_no_module_is_too_long():
    files = [ROOT / "cli.py", *sorted((ROOT / "graphexec").rglob("*.py"))]
    long = {str(p.relative_to(ROOT)): n for p in files if (n := len(p.read_text().splitlines())) > LIMIT}
    assert not long, f"split these modules by responsibility: {long}"
