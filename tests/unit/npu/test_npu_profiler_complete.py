"""An eager profile is complete: stats, a diagnosis measured by replay, launches and queues."""

from __future__ import annotations

import json

import graphexec.npu as npu
from graphexec.profiling.report_html import render
from graphexec.profiling.view_data import load


def _two_streams() -> None:
    x = npu.ones(128, 128)
    side = npu.Stream()
    for _ in range(3):
        y = x @ x
        side.wait_stream(npu.current_stream())
        with npu.stream(side):
            z = npu.ops.relu(y) + 1
        npu.current_stream().wait_stream(side)
        x = z * 0.01
    x.numpy()


def test_eager_profile_has_stats_and_a_replayed_diagnosis(tmp_path):
    npu.ones(4).numpy()
    with npu.profiler.profile(tmp_path) as prof:
        _two_streams()
    doc = json.loads(next(prof.path.rglob("msprof_*.json")).read_text())
    run = doc["otherData"]["runs"][0]
    stats, d = run["stats"], run["diagnosis"]
    assert stats["num_kernels"] == 12 and stats["num_streams"] == 2 and stats["num_events"] >= 3
    assert stats["makespan_us"] > 0 and 0 < stats["hbm_utilization"] < 1
    # the replay of the run as it ran is the run: the counterfactuals are measured against it
    assert abs(d["numbers"]["what_if_base_us"] - stats["makespan_us"]) < 1e-6
    assert {c["reason"] for c in d["causes"]} == {"launch", "dispatch", "memory", "compute"}
    assert all(c["gain"] >= 1 - 1e-9 for c in d["causes"]) and "actions" not in d
    assert d["analyses"]["launch"]["kernels"] == 12 and len(d["analyses"]["queues"]) == 2


def test_eager_report_is_not_half_empty(tmp_path):
    with npu.profiler.profile(tmp_path) as prof:
        _two_streams()
    page = render(load(prof.path))
    assert "no stats in this profile" not in page and "no diagnosis in this profile" not in page
    assert 'id="metric-makespan_us"' in page and 'id="diagnosis-reason"' in page
    assert "12 kernels" in page and 'class="queues"' in page
