"""The PROF folder (msprof's layout) and what `graphexec view` reads back from profiles."""

from __future__ import annotations

import csv
import json

import pytest
from profiling_graphs import elementwise_chain, tiny_chain

import graphexec as gx
from graphexec.errors import GraphExecError
from graphexec.profiling import env, msprof
from graphexec.profiling.report_html import render
from graphexec.profiling.view_data import load


def _run(graph, **kw):
    return gx.Session(graph, **kw).run(gx.default_feeds(graph))


def test_profile_block_keeps_the_runs_inside_it_only(tmp_path):
    g = tiny_chain(n=5)
    _run(g)                                   # before the block: not kept
    with env.profile(tmp_path) as c:
        r = _run(g)
    _run(g)                                   # after: not kept
    assert c.path is not None and c.path.parent == tmp_path and c.path.name.startswith("PROF_")
    doc = json.loads(next((c.path / msprof.OUTPUT).glob("msprof_*.json")).read_text())
    assert len(doc["otherData"]["runs"]) == 1
    assert doc["otherData"]["runs"][0]["stats"]["makespan_us"] == r.stats.makespan_us
    assert doc["otherData"]["runs"][0]["diagnosis"]["reason"] == r.diagnosis.reason


def test_every_card_of_a_multi_device_run_is_kept_and_viewed_together(tmp_path):
    g = elementwise_chain(n=2, rows=64, cols=64)
    with env.profile(tmp_path) as c:
        _run(g, devices=2, parallel="data")
    with open(next((c.path / msprof.OUTPUT).glob("op_summary_*.csv")), newline="") as f:
        rows = list(csv.DictReader(f))
    kernels = [r for r in rows if r["Task Type"] != "MEMCPY_ASYNC"]
    assert sorted(r["Device_id"] for r in kernels) == ["0", "1"]   # each card ran the chain, one fused kernel
    assert (c.path / "device_0" / "data").is_dir() and (c.path / "device_1" / "data").is_dir()
    view = load(c.path)
    lanes = {e["pid"] for e in view.events if e.get("ph") == "X" and e.get("cat") == "kernel"}
    assert lanes == {1, 3}                    # both cards' device processes in one Gantt
    assert view.counter_pid == 1 and {r["Device_id"] for r in view.rows} == {"0", "1"}   # the one step's cards
    assert {r["Step ID"] for r in rows} == {"1"}


def test_several_runs_are_steps_on_one_timeline(tmp_path):
    """Three runs: one clock, three steps (each starting where the one before ended), one
    device process, step ids on every slice, a ProfilerStep track, and a Step ID per row."""
    g = tiny_chain(n=4)
    with env.profile(tmp_path) as c:
        results = [_run(g) for _ in range(3)]
    doc = json.loads(next((c.path / msprof.OUTPUT).glob("msprof_*.json")).read_text())
    runs = doc["otherData"]["runs"]
    assert [r["step"] for r in runs] == [1, 2, 3] and runs[0]["start_us"] == 0.0
    assert all(b["start_us"] > a["start_us"] for a, b in zip(runs, runs[1:]))
    kernels = [e for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "kernel"]
    assert {e["pid"] for e in kernels} == {1} and len(kernels) == 3   # the chain fused: one kernel a run
    for step in (1, 2, 3):
        mine = [e for e in kernels if e["args"]["step"] == step]
        start = runs[step - 1]["start_us"]
        assert len(mine) == 1 and min(e["ts"] for e in mine) >= start
        assert max(e["ts"] + e["dur"] for e in mine) <= start + results[step - 1].stats.makespan_us + 1e3
    marks = [e for e in doc["traceEvents"] if e.get("cat") == "step"]
    assert [m["name"] for m in marks] == ["ProfilerStep#1", "ProfilerStep#2", "ProfilerStep#3"]
    assert [m["ts"] for m in marks] == [r["start_us"] for r in runs]
    assert all(a["ts"] + a["dur"] == b["ts"] for a, b in zip(marks, marks[1:]))   # back to back, one clock
    with open(next((c.path / msprof.OUTPUT).glob("op_summary_*.csv")), newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["Step ID"] for r in rows] == ["1", "2", "3"]
    times = [float(r["Task Start Time(us)"]) for r in rows]
    assert times == sorted(times) and len(set(times)) == len(times)   # no two runs' rows at one time
    view = load(c.path)
    assert len([e for e in view.events if e.get("cat") == "kernel"]) == 3 and len(view.rows) == 3


def test_a_failed_write_leaves_nothing_and_warns_once(tmp_path, monkeypatch, capsys):
    def broken(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(msprof, "write_csv", broken)
    with env.profile(tmp_path) as c:
        _run(tiny_chain(n=3))
    assert c.path is None and list(tmp_path.iterdir()) == []     # no PROF folder, no temporary one
    err = capsys.readouterr().err.strip().splitlines()
    # it names the folder the block was given, not ASCEND_PROFILING_OUTPUT_PATH, which nobody set (issue 39)
    assert len(err) == 1 and "No space left on device" in err[0] and f"the profile folder {tmp_path}" in err[0]
    assert env.OUTPUT not in err[0]


def test_two_blocks_in_one_second_get_two_folders(tmp_path, monkeypatch):
    monkeypatch.setattr(env.time, "strftime", lambda fmt: "20260101000000")
    paths = []
    for _ in range(2):
        with env.profile(tmp_path) as c:
            _run(tiny_chain(n=3))
        paths.append(c.path)
    assert paths[0] != paths[1] and all(p.is_dir() for p in paths)


def test_the_environment_switch(monkeypatch, tmp_path):
    assert env.from_environment({"ASCEND_PROFILING_ENABLED": "0"}) is None
    registered = []
    monkeypatch.setattr(env.atexit, "register", lambda fn, c: registered.append((fn, c)))
    c = env.from_environment({"ASCEND_PROFILING_ENABLED": "1", "ASCEND_PROFILING_OUTPUT_PATH": str(tmp_path)})
    try:
        assert c is not None and c.root == tmp_path and registered == [(env.stop_at_exit, c)]
        _run(tiny_chain(n=3))
    finally:
        path = env.stop(c)
    assert path is not None and path.parent == tmp_path


def test_view_reads_a_bare_timeline_and_a_profile_folder(tmp_path):
    r = _run(tiny_chain(n=4))
    r.write_profile(tmp_path / "prof")
    folder = load(tmp_path / "prof")
    assert len(folder.rows) == 1 and folder.rows[0]["OP Type"] == "Relu+Neg+Abs+Relu"   # op_summary.csv: fused
    assert folder.stats["makespan_us"] == r.stats.makespan_us and folder.diagnosis["causes"]
    bare = load(tmp_path / "prof" / "timeline.json")
    assert [row["Op Name"] for row in bare.rows] == [row["Op Name"] for row in folder.rows]   # from the trace
    page = render(bare)
    assert page.startswith("<!DOCTYPE html>") and f'id="metric-makespan_us">{r.stats.makespan_us:,.1f} us<' in page
    assert render(bare) == page               # deterministic bytes


def test_view_refuses_what_is_not_a_profile(tmp_path):
    with pytest.raises(GraphExecError, match="not a profile"):
        load(tmp_path)
    (tmp_path / "t.json").write_text('{"events": []}')
    with pytest.raises(GraphExecError, match="not a Chrome trace"):
        load(tmp_path / "t.json")


def test_a_multi_card_profile_folder_draws_card_0s_counters(tmp_path):
    g = elementwise_chain(n=2, rows=64, cols=64)
    r = _run(g, devices=2, parallel="data")
    r.write_profile(tmp_path / "prof")
    view = load(tmp_path / "prof")
    pid = view.counter_pid
    names = {e["pid"]: e["args"]["name"] for e in view.events if e.get("ph") == "M" and e["name"] == "process_name"}
    assert names[pid].startswith("device 0 (")
    assert view.queue() and max(v for _, v in view.queue()) == r.card_stats[0].max_queue_depth


def test_runs_of_one_session_continue_its_devices_clock(tmp_path):
    """One session, three runs: three steps placed where each run started on the device's
    running clock, so the host's time between runs (copies out, synchronize, the next feeds
    and launch) is the device's idle time between steps; each run's own numbers unchanged."""
    g = tiny_chain(n=4)
    alone = _run(g)
    session = gx.Session(g)
    with env.profile(tmp_path) as c:
        results = [session.run(gx.default_feeds(g)) for _ in range(3)]
    same = ("makespan_us", "host_time_us", "num_tasks")
    assert all(r.trace == alone.trace and all(getattr(r.stats, k) == getattr(alone.stats, k) for k in same)
               for r in results)   # each run on its own clock, from zero
    clocks = [r.run.clock for r in results]
    assert len({k[0] for k in clocks}) == 1 and [k[1] for k in clocks] == [0.0, clocks[0][2], 2 * clocks[0][2]]
    doc = json.loads(next((c.path / msprof.OUTPUT).glob("msprof_*.json")).read_text())
    starts = [r["start_us"] for r in doc["otherData"]["runs"]]
    assert starts == [k[1] for k in clocks] and starts == sorted(set(starts))
    marks = [e for e in doc["traceEvents"] if e.get("cat") == "step"]
    assert [m["ts"] for m in marks] == starts and [m["dur"] for m in marks] == [k[2] for k in clocks]
    kernels = sorted((e for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "kernel"),
                     key=lambda e: e["ts"])
    first, last = min(t.start_t for t in alone.run.tasks), max(t.end_t for t in alone.run.tasks)
    for a, b in zip(kernels, kernels[1:]):   # the device idles while the host works between runs
        gap = b["ts"] - (a["ts"] + a["dur"])
        assert gap > 0 and gap == pytest.approx(clocks[0][2] - last + first)
