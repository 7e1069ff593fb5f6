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
    "multi_host.py": ["model", "mode"],
    "sweep.py": ["model", "tasks"],
    "eager_overhead.py": ["case", "tasks"],
    "fidelity.py": ["kind", "/"],
    "calibration.py": ["rows", "split"],
    "ml_speed.py": ["model", "graphexec"],
    "decode_speed.py": ["step:", "one"],
}


@pytest.mark.parametrize("name", sorted(BENCHMARKS))
def test_benchmark_quick_mode(name):
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / name), "--quick"],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    assert lines and lines[0].split()[:2] == BENCHMARKS[name], proc.stdout[:500]
    assert len(lines) >= 2


def test_host_speed_first_run_mode():
    """--first (load + compile + first run against onnxruntime's) on its quick model: one line
    for it, timed or saying why it was not fetched, and the target beside the geometric mean."""
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "host_speed.py"), "--first", "--quick"],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    assert lines[0].split()[:2] == ["model", "graphexec"] and "first run" in lines[0], proc.stdout[:500]
    assert lines[1].startswith("tashkeel_rawi_int8"), proc.stdout[:500]
