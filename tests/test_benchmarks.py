"""Every benchmark runs in its quick mode and prints its table, so none of them rots
(the numbers are not asserted: this machine's timing says nothing)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# benchmark -> words its table's header line starts with
BENCHMARKS = {
    "host_speed.py": ["model", "graphexec"],
    "memory_plan.py": ["model", "streams"],
    "streams.py": ["model", "streams"],
    "compile_scale.py": ["nodes", "total"],
    "threads.py": ["model", "streams"],
    "task_overhead.py": ["case", "tasks"],
    "runtime_launch.py": ["case", "tasks"],
    "multi_device.py": ["model", "mode"],
    "sweep.py": ["model", "tasks"],
    "eager_overhead.py": ["case", "tasks"],
}


@pytest.mark.parametrize("name", sorted(BENCHMARKS))
def test_benchmark_quick_mode(name):
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / name), "--quick"],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    assert lines and lines[0].split()[:2] == BENCHMARKS[name], proc.stdout[:500]
    assert len(lines) >= 2
