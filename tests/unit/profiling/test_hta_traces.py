"""Holistic Trace Analysis (the ``HolisticTraceAnalysis`` test extra) runs its temporal,
idle-time and kernel breakdowns on graphexec's traces and agrees with graphexec's numbers."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

import graphexec as gx
import graphexec.npu as npu

MODELS = Path(__file__).resolve().parents[3] / "models"
hta = pytest.importorskip("hta.trace_analysis", reason="the HolisticTraceAnalysis test extra")


@pytest.fixture(autouse=True)
def _no_rounding(monkeypatch):
    monkeypatch.setenv("HTA_DISABLE_NS_ROUNDING", "1")   # HTA floors to whole us by default


def _analysis(folder, trace: dict):
    (folder / "rank-0.json").write_text(json.dumps(trace, default=str))
    return hta.TraceAnalysis(trace_dir=str(folder))


def test_breakdowns_of_a_two_stream_run(tmp_path):
    graph = gx.load(MODELS / "inception_block.onnx")
    x = np.random.default_rng(0).standard_normal((1, 192, 28, 28)).astype(np.float32)
    result = gx.Session(graph, streams=2).run({graph.inputs[0]: x})
    a = _analysis(tmp_path, result.trace)
    kernels = [e for e in result.trace["traceEvents"] if e.get("cat") == "kernel"]
    temporal = a.get_temporal_breakdown(visualize=False)
    busy = sum(e["dur"] for e in kernels)
    span = max(e["ts"] + e["dur"] for e in kernels) - min(e["ts"] for e in kernels)
    assert temporal["kernel_time(us)"][0] == pytest.approx(span)
    assert temporal["idle_time(us)"][0] == pytest.approx(result.stats.device_idle_us, abs=1e-6)
    idle = a.get_idle_time_breakdown(visualize=False)[0]
    assert set(idle["stream"]) == {0, 1}
    summary, per_kernel = a.get_gpu_kernel_breakdown(visualize=False, num_kernels=1000)
    assert list(summary["kernel_type"]) == ["COMPUTATION"]
    by_name: dict[str, float] = {}
    for e in kernels:
        by_name[e["name"]] = by_name.get(e["name"], 0.0) + e["dur"]
    assert dict(zip(per_kernel["name"], per_kernel["sum (us)"])) == pytest.approx(by_name)
    assert sum(by_name.values()) == pytest.approx(busy)


def test_breakdowns_of_an_eager_profile_in_steps(tmp_path):
    x = npu.ones(64, 64)
    with npu.profiler.profile(tmp_path / "prof") as prof:
        for _ in range(2):
            x = npu.ops.relu(x @ x) * 0.01
        x.numpy()
    doc = json.loads(next(prof.path.rglob("msprof_*.json")).read_text())
    assert doc["distributedInfo"]["rank"] == 0
    assert any(e.get("name", "").startswith("ProfilerStep#") for e in doc["traceEvents"])
    a = _analysis(tmp_path, doc)
    temporal = a.get_temporal_breakdown(visualize=False)
    assert temporal["idle_time(us)"][0] == pytest.approx(doc["otherData"]["runs"][0]["stats"]["device_idle_us"],
                                                          abs=1e-6)
    idle = a.get_idle_time_breakdown(visualize=False)[0]   # kernels only (HTA reads no "memcpy" cat), 2 decimals
    ks = sorted((e["ts"], e["ts"] + e["dur"]) for e in doc["traceEvents"] if e.get("cat") == "kernel")
    assert idle["idle_time"].sum() == pytest.approx(sum(b[0] - a[1] for a, b in zip(ks, ks[1:])), abs=0.01)
    shutil.rmtree(tmp_path / "prof")
