"""torch_npu's profiler API: a schedule's active steps as ASCEND_PROFILER_OUTPUT's files."""

from __future__ import annotations

import csv
import json

import pytest

import graphexec.npu as npu
from graphexec.errors import GraphExecError
from graphexec.profiling.report_html import render
from graphexec.profiling.view_data import load

P = npu.profiler
FILES = ["api_statistic.csv", "kernel_details.csv", "memory_record.csv", "op_statistic.csv", "operator_details.csv",
         "operator_memory.csv", "step_trace_time.csv", "trace_view.json"]


def _rows(path):
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _train(prof, steps: int) -> None:
    x = npu.ones(64, 64)
    for _ in range(steps):
        x = npu.ops.relu(x @ x) * 0.01 + 1
        x.numpy()
        prof.step()


def test_schedule_is_torchs():
    s = P.schedule(wait=1, warmup=1, active=2, repeat=1, skip_first=1)
    A = P.ProfilerAction
    assert [s(i) for i in range(7)] == [A.NONE, A.NONE, A.WARMUP, A.RECORD, A.RECORD_AND_SAVE, A.NONE, A.NONE]
    with pytest.raises(GraphExecError, match="active must be"):
        P.schedule(wait=0, warmup=0, active=0)


def test_a_three_step_schedule_writes_the_documented_files(tmp_path):
    with P.profile(activities=[P.ProfilerActivity.CPU, P.ProfilerActivity.NPU],
                   schedule=P.schedule(wait=1, warmup=1, active=3, repeat=1),
                   on_trace_ready=P.tensorboard_trace_handler(tmp_path, worker_name="w0"),
                   record_shapes=True, profile_memory=True, with_stack=True) as prof:
        _train(prof, 6)
    (folder,) = prof.paths
    assert folder.parent == tmp_path and folder.name.startswith("w0_") and folder.name.endswith("_ascend_pt")
    out = folder / "ASCEND_PROFILER_OUTPUT"
    assert sorted(p.name for p in out.iterdir()) == FILES
    kernels = _rows(out / "kernel_details.csv")
    assert [r["Type"] for r in kernels if r["Step Id"] == "2"] == ["MatMul", "Relu", "Mul", "Add", "MemcpyAsync"]
    assert {r["Step Id"] for r in kernels} == {"2", "3", "4"}           # wait 1, warmup 1, active 3
    assert kernels[0]["Input Shapes"] == "64,64;64,64" and kernels[0]["Accelerator Core"] == "AI_CORE"
    steps = _rows(out / "step_trace_time.csv")
    assert [r["Step"] for r in steps] == ["2", "3", "4"]
    busy = sum(float(r["Duration(us)"]) for r in kernels if r["Step Id"] == "2" and r["Type"] != "MemcpyAsync")
    assert float(steps[0]["Computing"]) == pytest.approx(busy, abs=2e-3)   # one stream: the union is the sum
    ops = _rows(out / "operator_details.csv")
    assert len(ops) == len(kernels) and float(ops[0]["Host Self Duration(us)"]) > 0
    assert "test_npu_profiler_steps.py" in ops[0]["Call Stack"] and "_train" in ops[0]["Call Stack"]   # with_stack
    memory = _rows(out / "memory_record.csv")
    assert memory and {r["Component"] for r in memory} == {"PTA"}
    assert max(float(r["Total Allocated(MB)"]) for r in memory) > 0
    doc = json.loads((out / "trace_view.json").read_text())
    names = [e["name"] for e in doc["traceEvents"] if e.get("cat") == "step"]
    assert names == ["ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"]
    assert [r["step"] for r in doc["otherData"]["runs"]] == [2, 3, 4]
    page = render(load(folder))                                        # graphexec view reads it
    assert "no stats in this profile" not in page and 'id="diagnosis-reason"' in page


def test_no_schedule_records_start_to_stop_and_the_old_form_still_works(tmp_path):
    with P.profile(on_trace_ready=P.tensorboard_trace_handler(tmp_path / "a")) as prof:
        _train(prof, 2)
    kernels = _rows(prof.path / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv")
    assert {r["Step Id"] for r in kernels} == {"0", "1"}
    assert not (prof.path / "ASCEND_PROFILER_OUTPUT" / "memory_record.csv").exists()   # profile_memory off
    assert {r["Call Stack"] for r in _rows(prof.path / "ASCEND_PROFILER_OUTPUT" / "operator_details.csv")} == {""}
    with P.profile(tmp_path / "b") as old:
        npu.ones(8).numpy()
    assert old.path.name.startswith("PROF_")
    with pytest.raises(GraphExecError, match="not both"):
        P.profile(tmp_path, on_trace_ready=P.tensorboard_trace_handler(tmp_path))
