"""The launch benchmark's smoke mode runs and prints its table (timing is not asserted)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_runtime_launch_benchmark_quick():
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "runtime_launch.py"), "--quick"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].split()[:2] == ["case", "tasks"]
    rows = [line for line in lines if line.startswith(("acl", "Device"))]
    assert len(rows) == 4 and all(" 200 " in r for r in rows)
    assert "target" in lines[-1]
