"""The golden verdicts do not hang on the BLAS build: a sample of the cases whose outputs go
through GEMMs passes here and in a subprocess in which OpenBLAS runs another kernel (its
``OPENBLAS_CORETYPE``), where the output bits differ but the plans, schedules, stats and traces
must not, and the outputs must stay within the stated tolerances of their outside oracle's
(``golden_oracle``: onnx's expected outputs, onnxruntime's for the light model)."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import golden
import pytest

TESTS = Path(__file__).resolve().parents[1]
GEMM_WORDS = ("attention", "einsum", "matmul", "gemm", "conv")
SAMPLE = ["light/light_squeezenet/streams=4"] + [
    name for name, *_ in golden.node_cases() if golden.in_sample(name) and any(w in name for w in GEMM_WORDS)][:24]
# generic kernels that every x86-64 CPU runs, tried in order until one differs from today's
KERNELS = ("Sandybridge", "Prescott", "Haswell")
PROBE = f"""
import json, sys
sys.path.insert(0, {str(TESTS)!r})
import threadpoolctl, golden
arch = [i.get("architecture") for i in threadpoolctl.threadpool_info() if i.get("internal_api") == "openblas"]
print(json.dumps({{"arch": arch, "verdicts": golden.check_named(sys.argv[1:])}}))
"""


def _openblas_arch() -> str | None:
    threadpoolctl = pytest.importorskip("threadpoolctl")
    arch = [i.get("architecture") for i in threadpoolctl.threadpool_info() if i.get("internal_api") == "openblas"]
    return arch[0] if arch else None


def test_same_verdicts_under_another_openblas_kernel():
    if platform.machine().lower() not in ("x86_64", "amd64"):
        pytest.skip(f"OPENBLAS_CORETYPE names x86 kernels; this machine is {platform.machine()}")
    now = _openblas_arch()
    if now is None:
        pytest.skip("numpy's BLAS is not OpenBLAS here: no kernel to switch")
    other = next(k for k in KERNELS if k.lower() != now.lower())
    env = {**os.environ, "OPENBLAS_CORETYPE": other}
    p = subprocess.run([sys.executable, "-c", PROBE, *SAMPLE], env=env, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr[-2000:]
    there = json.loads(p.stdout.strip().splitlines()[-1])
    assert there["arch"] and there["arch"][0].lower() != now.lower(), f"OpenBLAS did not switch kernel: {there['arch']}"
    here = golden.check_named(SAMPLE)
    assert len(here) == len(SAMPLE)
    assert there["verdicts"] == here
    assert not any(here.values()), here
