"""Collectives are op rows, as msprof's op_summary (Task Type HCCL) and torch_npu's
kernel_details.csv (Type hcom_allReduce_) list them: a 4-rank ACL all-reduce appears in
op_summary.csv, op_statistic.csv and kernel_details.csv with the duration of its trace slice."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

import graphexec.npu as npu
from graphexec import acl, hccl
from graphexec.profiling import env
from graphexec.profiling.view_data import load

P = npu.profiler


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _all_reduce(steps: int = 1, prof=None) -> None:
    comms = hccl.comm_init_all(4, [0, 1, 2, 3])
    streams, bufs = {}, {}
    for d in range(4):
        acl.set_device(d)
        streams[d], bufs[d] = acl.create_stream(), acl.malloc(4 << 20)
    for _ in range(steps):
        for d in range(4):
            acl.set_device(d)
            hccl.all_reduce(bufs[d], bufs[d], 1 << 20, hccl.HCCL_DATA_TYPE_FP32, hccl.HCCL_REDUCE_SUM,
                            comms[d], streams[d])
        for d in range(4):
            acl.set_device(d)
            acl.synchronize_device()
        if prof is not None:
            prof.step()


def _slices(doc: dict) -> list[dict]:
    return sorted((e for e in doc["traceEvents"] if e.get("cat") == "hccl" and e.get("ph") == "X"),
                  key=lambda e: e["ts"])


def test_prof_folder_lists_the_all_reduce(tmp_path):
    acl.init(system="atlas800-910")
    try:
        with env.profile(tmp_path):
            _all_reduce()
    finally:
        acl.finalize()
    out = next(tmp_path.rglob("mindstudio_profiler_output"))
    parts = _slices(json.loads(next(out.glob("msprof_*.json")).read_text()))
    rows = _rows(next(out.glob("op_summary_*.csv")))
    assert len(parts) == 4 and len(rows) == 4   # one row per rank's part, every rank a card of the table
    assert sorted(int(r["Device_id"]) for r in rows) == [0, 1, 2, 3]
    for r, e in zip(sorted(rows, key=lambda r: float(r["Task Start Time(us)"])), parts):
        assert (r["Task Type"], r["OP Type"], r["Bytes"], r["Bound"]) == ("HCCL", "hcom_allReduce_", str(4 << 20),
                                                                          "communication")
        assert r["Op Name"] == f"hcom_allReduce__0_{r['Device_id']}"
        assert float(r["Task Duration(us)"]) == pytest.approx(e["dur"], abs=1e-3)
        assert float(r["Task Start Time(us)"]) == pytest.approx(e["ts"], abs=1e-3)
    stats = _rows(next(out.glob("op_statistic_*.csv")))
    assert [(s["OP Type"], s["Core Type"], s["Count"]) for s in stats] == [("hcom_allReduce_", "HCCL", "1")] * 4
    assert all(float(s["Total Time(us)"]) == pytest.approx(parts[0]["dur"], abs=1e-3) for s in stats)
    view = load(tmp_path)   # the report's op table: every rank's part
    assert sorted(r["Op Name"] for r in view.rows) == [f"hcom_allReduce__0_{d}" for d in range(4)]


def test_kernel_details_list_the_all_reduce(tmp_path):
    acl.init(system="atlas800-910")
    try:
        with P.profile(schedule=P.schedule(wait=0, warmup=0, active=2, repeat=1),
                       on_trace_ready=P.tensorboard_trace_handler(tmp_path, worker_name="w")) as prof:
            _all_reduce(2, prof)
    finally:
        acl.finalize()
    out = prof.paths[0] / "ASCEND_PROFILER_OUTPUT"
    parts = _slices(json.loads((out / "trace_view.json").read_text()))
    rows = sorted(_rows(out / "kernel_details.csv"), key=lambda r: float(r["Start Time(us)"]))
    assert len(parts) == len(rows) == 8   # 4 ranks, 2 steps
    assert sorted((r["Step Id"], r["Device_id"]) for r in rows) == sorted((s, d) for s in "01" for d in "0123")
    for r, e in zip(rows, parts):
        assert (r["Type"], r["Accelerator Core"]) == ("hcom_allReduce_", "HCCL")
        assert float(r["Duration(us)"]) == pytest.approx(e["dur"], abs=1e-3)
        assert float(r["Start Time(us)"]) == pytest.approx(e["ts"], abs=1e-3)
    stats = _rows(out / "op_statistic.csv")
    assert [(s["OP Type"], s["Core Type"], s["Count"]) for s in stats] == [("hcom_allReduce_", "HCCL", "8")]
    assert float(stats[0]["Total Time(us)"]) == pytest.approx(sum(e["dur"] for e in parts), abs=1e-2)
    view = load(prof.paths[0])   # torch_npu's layout: the report's op table comes from the trace
    comm = [r for r in view.rows if r.get("Task Type") == "HCCL"]
    assert len(comm) == 8 and {r["OP Type"] for r in comm} == {"hcom_allReduce_"}
