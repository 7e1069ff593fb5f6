"""op_summary.csv / op_statistic.csv, and the queue, idle and host-wait numbers in the stats."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from dags import random_dag
from profiling_graphs import elementwise_chain, tiny_chain, wide_matmuls

import graphexec as gx
from graphexec.profiling.counters import measure, run_metrics, steps
from graphexec.profiling.summary import STATISTIC_COLUMNS, SUMMARY_COLUMNS

COLUMNS = ["Op Name", "OP Type", "Task Type", "Stream ID", "Task Start Time(us)", "Task Duration(us)",
           "Task Wait Time(us)", "Block Dim", "Input Shapes", "Input Data Types", "Output Shapes",
           "Output Data Types", "FLOPs", "Bytes", "Bound", "Host Kernel"]


def _profile(graph, tmp_path: Path, streams=1, device="ascend910"):
    result = gx.Session(graph, streams=streams, device=device).run(gx.default_feeds(graph))
    result.write_profile(tmp_path)
    with open(tmp_path / "op_summary.csv", newline="") as f:
        summary = list(csv.reader(f))
    with open(tmp_path / "op_statistic.csv", newline="") as f:
        statistic = list(csv.DictReader(f))
    return result, summary, statistic


@pytest.fixture(scope="module")
def dag(tmp_path_factory):
    return _profile(gx.load(random_dag(np.random.default_rng(3), 16)), tmp_path_factory.mktemp("p"), streams=3)


def test_columns_are_as_named(dag):
    _, summary, statistic = dag
    assert summary[0] == COLUMNS == list(SUMMARY_COLUMNS)
    assert list(statistic[0]) == list(STATISTIC_COLUMNS)


def test_durations_and_starts_equal_the_trace(dag):
    result, summary, _ = dag
    rows = [dict(zip(summary[0], r)) for r in summary[1:]]
    kernels = {e["name"]: e for e in result.trace["traceEvents"] if e.get("cat") == "kernel"}
    assert sorted(r["Op Name"] for r in rows) == sorted(kernels)
    for r in rows:
        e = kernels[r["Op Name"]]
        assert float(r["Task Duration(us)"]) == pytest.approx(e["dur"], abs=5e-4)
        assert float(r["Task Start Time(us)"]) == pytest.approx(e["ts"], abs=5e-4)
        assert int(r["Stream ID"]) == e["tid"] and int(r["Block Dim"]) == e["args"]["block_dim"]
    total = sum(float(r["Task Duration(us)"]) for r in rows)
    assert total == pytest.approx(sum(e["dur"] for e in kernels.values()), abs=5e-4 * len(rows))


def test_wait_time_is_the_gap_after_the_previous_task_on_the_stream(dag):
    _, summary, _ = dag
    rows = [dict(zip(summary[0], r)) for r in summary[1:]]
    last: dict[str, float] = {}
    for r in rows:
        start, dur, wait = (float(r[c]) for c in ("Task Start Time(us)", "Task Duration(us)", "Task Wait Time(us)"))
        expected = start - last[r["Stream ID"]] if r["Stream ID"] in last else 0.0
        assert wait == pytest.approx(max(0.0, expected), abs=2e-3)
        last[r["Stream ID"]] = start + dur


def test_statistic_adds_up(dag):
    _, summary, statistic = dag
    rows = [dict(zip(summary[0], r)) for r in summary[1:]]
    assert sum(int(s["Count"]) for s in statistic) == len(rows)
    assert sum(float(s["Ratio(%)"]) for s in statistic) == pytest.approx(100, abs=0.01)
    for s in statistic:
        durs = [float(r["Task Duration(us)"]) for r in rows if r["OP Type"] == s["OP Type"]
                and r["Task Type"] == s["Core Type"]]
        assert float(s["Total Time(us)"]) == pytest.approx(sum(durs), abs=1e-3 * len(durs))
        assert float(s["Min Time(us)"]) <= float(s["Avg Time(us)"]) <= float(s["Max Time(us)"])
    totals = [float(s["Total Time(us)"]) for s in statistic]
    assert totals == sorted(totals, reverse=True)


@pytest.mark.parametrize("build, bound", [(elementwise_chain, "memory"), (tiny_chain, "overhead"),
                                          (lambda: wide_matmuls(k=131072), "compute")])   # float16 (force_fp16)
def test_bound_follows_the_roofline(build, bound, tmp_path):
    _, summary, _ = _profile(build(), tmp_path)
    assert {r[summary[0].index("Bound")] for r in summary[1:]} == {bound}


def test_shapes_and_dtypes_in_msprof_form(tmp_path):
    _, summary, _ = _profile(wide_matmuls(n=2, m=16, k=512, width=16), tmp_path, device="ascend910b")
    row = dict(zip(summary[0], summary[1]))
    assert row["OP Type"] == "MatMul" and row["Task Type"] == "AI_CORE"
    assert (row["Input Shapes"], row["Input Data Types"]) == ("16,512;512,16", "FLOAT;FLOAT")
    assert (row["Output Shapes"], row["Output Data Types"]) == ("16,16", "FLOAT")
    assert int(row["FLOPs"]) == 2 * 16 * 16 * 512
    _, summary, _ = _profile(tiny_chain(n=2), tmp_path, device="ascend910b")
    assert dict(zip(summary[0], summary[1]))["Task Type"] == "AI_VECTOR_CORE"


def test_stats_have_queue_idle_and_host_wait(dag):
    s = dag[0].stats
    assert 0 <= s.host_wait_us <= s.device_idle_us <= s.makespan_us
    assert 0 < s.mean_queue_depth <= s.max_queue_depth
    assert json.loads(json.dumps(s.to_dict()))["max_queue_depth"] == s.max_queue_depth


def _task(stream, enq, start, end, kind="kernel"):
    return SimpleNamespace(kind=kind, stream=SimpleNamespace(id=stream), enqueue_t=enq, start_t=start, end_t=end, seq=0)


def test_idle_time_splits_into_host_wait_and_dependency_wait():
    tasks = [_task(0, 0, 0, 10),
             _task(0, 12, 12, 20),                   # every queue empty from 10 to 12: the host was late
             _task(1, 13, 25, 25, kind="wait"),      # queued from 13, satisfied at 25: idle 20..25 is not the host's
             _task(1, 14, 25, 30)]
    m = run_metrics(tasks)
    assert m["device_idle_us"] == pytest.approx(2 + 5)
    assert m["host_wait_us"] == pytest.approx(2)
    assert m["max_queue_depth"] == 3
    # depth: 1 on [0,10), 0 on [10,12), 1 on [12,13), 2 on [13,14), 3 on [14,20), 2 on [20,25), 1 on [25,30)
    assert m["mean_queue_depth"] == pytest.approx((10 + 0 + 1 + 2 + 18 + 10 + 5) / 30)


def test_steps_and_measure():
    series = steps([(0, 1), (2, 1), (2, -1), (5, -1)])
    assert series == [(0, 1), (2, 1), (5, 0)]
    assert measure(series, 1, 4) == (3, 3)
    assert measure(series, 0, 6, lambda v: v == 0) == (1, 0)


def test_table_aligns_numbers_right_and_text_left():
    from graphexec.profiling.console import table

    text = table(["op", "time (us)", "share"], [["Conv", "1,234.5", "60.1%"], ["Relu", "7.0", "0.3%"]])
    lines = text.splitlines()   # not a terminal: plain text, no escape codes
    assert lines[0] == "op    time (us)  share" and lines[1] == "---- ---------- ------"
    assert lines[2] == "Conv    1,234.5  60.1%" and lines[3] == "Relu        7.0   0.3%"
    assert "\x1b" not in text


def test_table_on_a_terminal_is_styled_and_fits_its_width(monkeypatch):
    import io
    import os

    from graphexec.profiling.console import table

    class Tty(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setattr("shutil.get_terminal_size", lambda fallback=(0, 0): os.terminal_size((60, 24)))
    wide = [["x" * 50, "y" * 50, "1.0"]]
    text = table(["a", "b", "n"], wide, stream=Tty())
    assert "\x1b[1m" in text                                   # a bold header
    plain = [line for line in text.replace("\x1b[1m", "").replace("\x1b[0m", "").splitlines()]
    assert max(len(line) for line in plain) <= 60              # folded to the terminal's width
    monkeypatch.setenv("NO_COLOR", "1")
    assert "\x1b" not in table(["a"], [["b"]], stream=Tty())


def test_progress_draws_only_on_a_terminal():
    import io

    from graphexec.profiling.console import Progress

    quiet = io.StringIO()
    with Progress(2, quiet) as bar:   # StringIO is not a terminal
        bar.update(1, "running")
    assert quiet.getvalue() == ""
    shown = io.StringIO()
    with Progress(2, shown, enabled=True) as bar:
        bar.update(1, "running")
    text = shown.getvalue()
    assert "1/2" in text and "running" in text and "\x1b[2K" in text   # drawn, then erased in place
