"""Schedules must not depend on the process's string-hash seed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = """
import glob, os, onnx, graphexec as gx
light = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
path = [p for p in glob.glob(os.path.join(light, "*.onnx")) if "inception_v1" in p][0]
s = gx.Session(gx.load(path), streams=4, policy="chains")
print(s.compiled.schedule.stream_of)
"""


def test_chain_cover_is_the_same_whatever_the_hash_seed():
    outs = set()
    for seed in ("1", "2", "3"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(ROOT)}
        proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env,
                              timeout=120, cwd=ROOT)
        assert proc.returncode == 0, proc.stderr[-2000:]
        outs.add(proc.stdout)
    assert len(outs) == 1
