"""The torch-style profiler records everything the steps ran, as torch_npu records all the
device work of its profiled steps: Session runs (every card), ACL launches and collectives,
beside eager ops; and writes operator_memory.csv, api_statistic.csv and, when collectives
ran, communication.json and communication_matrix.json from what was recorded."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

import graphexec as gx
import graphexec.npu as npu
from graphexec import acl, hccl

P = npu.profiler
ROOT = Path(__file__).resolve().parents[3]


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _profile(tmp: Path, **kw):
    return P.profile(schedule=P.schedule(wait=1, warmup=0, active=2, repeat=1), profile_memory=True,
                     on_trace_ready=P.tensorboard_trace_handler(tmp, worker_name="w"), **kw)


@pytest.fixture(scope="module")
def sessions(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("sessions")
    graph = gx.load(ROOT / "models" / "inception_block.onnx")
    session = gx.Session(graph, streams=2)
    x = np.random.default_rng(0).standard_normal((1, 192, 28, 28)).astype(np.float32)
    results = []
    y = npu.ones(32, 32)
    with _profile(tmp) as prof:
        for _ in range(3):
            results.append(session.run({graph.inputs[0]: x}))
            y = (y @ y) * 0.5   # an eager op in the same step
            y.numpy()
            prof.step()
    (folder,) = prof.paths
    return folder / "ASCEND_PROFILER_OUTPUT", results[1:], session


def test_session_runs_are_in_their_steps(sessions):
    out, results, _ = sessions
    kernels = _rows(out / "kernel_details.csv")
    doc = json.loads((out / "trace_view.json").read_text())
    runs = [r for r in doc["otherData"]["runs"] if r.get("session")]
    assert [r["step"] for r in runs] == [1, 2]
    for r, result in zip(runs, results):   # each run's own stats, and its kernels under its step
        assert r["stats"]["makespan_us"] == pytest.approx(result.stats.makespan_us)
        mine = [k for k in kernels if k["Step Id"] == str(r["step"]) and k["Name"] in
                {t.name for t in result.run.tasks if t.kind == "kernel"}]
        assert len(mine) == result.stats.num_kernels
        assert min(float(k["Start Time(us)"]) for k in mine) >= r["window"][0] - 1e-6
    steps = sorted({tuple(e["args"].values()) + (e["ts"], e["dur"]) for e in doc["traceEvents"]
                    if e.get("cat") == "step"})
    assert [s[0] for s in steps] == [1, 2] and steps[0][1] + steps[0][2] <= steps[1][1] + 1e-6
    slices: dict = {}
    for e in doc["traceEvents"]:   # nothing overlaps on a track: eager and Session work apart
        if e.get("ph") == "X" and e.get("cat") in ("kernel", "memcpy"):
            slices.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"]))
    for spans in slices.values():
        spans.sort()
        assert all(b[0] >= a[1] - 1e-6 for a, b in zip(spans, spans[1:]))
    eager = [k for k in kernels if k["Type"] == "MatMul"]
    assert [k["Step Id"] for k in eager] == ["1", "2"]


def _union(spans) -> float:
    total, end = 0.0, -1.0
    for a, b in sorted(spans):
        total += max(0.0, b - max(a, end))
        end = max(end, b)
    return total


def test_step_trace_and_api_statistic(sessions):
    out, results, _ = sessions
    steps = _rows(out / "step_trace_time.csv")
    kernels = _rows(out / "kernel_details.csv")
    assert [(s["Step"], s["Device_id"]) for s in steps] == [("1", "0"), ("2", "0")]   # one row per device and step
    for s, result in zip(steps, results):   # the Session run's kernels and the eager op's, on one clock
        mine = [(float(k["Start Time(us)"]), float(k["Start Time(us)"]) + float(k["Duration(us)"]))
                for k in kernels if k["Step Id"] == s["Step"] and k["Accelerator Core"] != "MEMCPY_ASYNC"]
        assert float(s["Computing"]) == pytest.approx(_union(mine), abs=5e-3)
        own = _union((t.start_t, t.end_t) for t in result.run.tasks if t.kind == "kernel")
        assert own < float(s["Computing"]) <= own + sum(b - a for a, b in mine) + 5e-3
    api = {r["API Name"]: r for r in _rows(out / "api_statistic.csv")}
    launches = sum(len(r.run.launches) for r in results)   # every launch of the plan's graph-mode runs
    calls = api["ModelExecute"] if results[0].run.graph_mode else api["rtKernelLaunch"]
    assert int(calls["Count"]) >= 2 and float(calls["Time(us)"]) > 0 and launches > 0
    assert float(calls["Avg(us)"]) == pytest.approx(float(calls["Time(us)"]) / int(calls["Count"]), rel=1e-3)


def test_operator_memory_has_the_plans_tensors_and_the_eager_blocks(sessions):
    out, results, session = sessions
    rows = _rows(out / "operator_memory.csv")
    plan = results[0].run.plan
    sizes = {e.tensor: e.size for e in plan.memory_plan.buffers if e.region == "activation"}
    named = [r for r in rows if ": " in r["Name"]]
    assert len(named) == 2 * len(sizes)   # each activation tensor once per run
    for r in named:
        assert float(r["Size(KB)"]) * 1024 == pytest.approx(sizes[r["Name"].split(": ", 1)[1]])
        assert float(r["Release Time(us)"]) >= float(r["Allocation Time(us)"])
        assert float(r["Allocation Total Reserved(MB)"]) * 1024 * 1024 == pytest.approx(   # 3 decimals of MB
            plan.memory_plan.region_bytes["activation"], abs=530)
    eager = [r for r in rows if "#" in r["Name"]]
    assert eager and all(r["Device Type"] == "NPU:0" for r in eager)


def test_acl_collectives_write_the_communication_files(tmp_path):
    acl.init(system="atlas800-910")
    try:
        comms = hccl.comm_init_all(4, [0, 1, 2, 3])
        streams, bufs = {}, {}
        for d in range(4):
            acl.set_device(d)
            streams[d], bufs[d] = acl.create_stream(), acl.malloc(4 << 20)
        with _profile(tmp_path) as prof:
            for _ in range(3):
                for d in range(4):
                    acl.set_device(d)
                    hccl.all_reduce(bufs[d], bufs[d], 1 << 20, hccl.HCCL_DATA_TYPE_FP32, hccl.HCCL_REDUCE_SUM,
                                    comms[d], streams[d])
                for d in range(4):
                    acl.set_device(d)
                    acl.synchronize_device()
                prof.step()
    finally:
        acl.finalize()
    out = prof.paths[0] / "ASCEND_PROFILER_OUTPUT"
    comm = json.loads((out / "communication.json").read_text())
    matrix = json.loads((out / "communication_matrix.json").read_text())
    assert sorted(comm) == ["step1", "step2"]
    ops = {k: v for k, v in comm["step1"]["collective"].items() if k != "Total Op Info"}
    assert len(ops) == 4   # every rank's part
    for key, op in ops.items():
        t = op["Communication Time Info"]
        assert t["Elapse Time(ms)"] == pytest.approx(t["Wait Time(ms)"] + t["Transit Time(ms)"], abs=1e-9)
        sent = sum(e["Transit Size(MB)"] for e in matrix["step1"]["collective"][key].values())
        assert op["Communication Bandwidth Info"]["HCCS"]["Transit Size(MB)"] == pytest.approx(sent)
        assert sent == pytest.approx(2 * 3 * (4 << 20) / 4 / 1e6)   # mesh all-reduce: a chunk to each peer, twice
    total = comm["step1"]["collective"]["Total Op Info"]["Communication Time Info"]
    assert total["Elapse Time(ms)"] == pytest.approx(sum(o["Communication Time Info"]["Elapse Time(ms)"]
                                                         for o in ops.values()))
    api = {r["API Name"]: r for r in _rows(out / "api_statistic.csv")}
    assert api["HcclAllReduce"]["Level"] == "HCCL" and api["HcclAllReduce"]["Count"] == "8"
    steps = _rows(out / "step_trace_time.csv")
    assert all(float(s["Communication"]) > 0 for s in steps) and len(steps) == 8


def test_the_report_of_mixed_steps(sessions):
    from graphexec.profiling.report_html import render
    from graphexec.profiling.view_data import load

    out, results, _ = sessions
    page = render(load(out.parent))
    steps = page.split('class="sortable steps"')[1].split("</table>")[0]
    for result in results:   # each Session run is a row of the steps table, with its own makespan
        assert f'data-v="{result.stats.makespan_us:.3f}"' in steps
