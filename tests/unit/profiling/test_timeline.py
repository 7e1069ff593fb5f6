"""timeline.json: valid Trace Event Format, flows that bind, counters that agree with the stats."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import jsonschema
import numpy as np
import pytest
from dags import random_dag

import graphexec as gx
from graphexec.profiling.counters import level_at
from graphexec.profiling.timeline import CORES_COUNTER, HBM_COUNTER, POOL_COUNTER, QUEUE_COUNTER, timeline

SCHEMA = json.loads((Path(__file__).resolve().parents[3] / "schemas" / "trace_event.schema.json").read_text())
MODEL = Path(__file__).resolve().parents[3] / "models" / "inception_block.onnx"


def _run(graph, streams, device="ascend910"):
    return gx.Session(graph, streams=streams, device=device).run(gx.default_feeds(graph))


@pytest.fixture(scope="module",
                params=[("dag", 3, "ascend910"), ("dag", 3, "ascend910b"), ("inception", 1, "ascend910")])
def run(request, tmp_path_factory):
    """A run with cross-stream events (a random DAG on three streams) and a plain one; written to disk."""
    kind, streams, device = request.param
    graph = gx.load(random_dag(np.random.default_rng(3), 16)) if kind == "dag" else gx.load(MODEL)
    result = _run(graph, streams, device)
    folder = tmp_path_factory.mktemp("profile")
    result.write_profile(folder)
    return result, json.loads((folder / "timeline.json").read_text())


def test_schema_is_a_valid_schema():
    jsonschema.Draft202012Validator.check_schema(SCHEMA)


def test_timeline_follows_the_trace_event_format(run):
    _, doc = run
    jsonschema.Draft202012Validator(SCHEMA).validate(doc)
    phases = {e["ph"] for e in doc["traceEvents"]}
    assert {"X", "s", "f", "C", "M"} <= phases


@pytest.mark.parametrize("bad", [
    {"ph": "X", "name": "k", "ts": 0, "pid": 1, "tid": 0},                                  # no dur
    {"ph": "X", "name": "k", "ts": 0, "dur": -1, "pid": 1, "tid": 0},                       # negative dur
    {"ph": "C", "name": "depth", "ts": 0, "pid": 1, "args": {"tasks": "three"}},           # not a number
    {"ph": "s", "name": "launch", "cat": "flow", "ts": 0, "pid": 0, "tid": 0},              # flow without id
    {"ph": "f", "name": "launch", "cat": "flow", "id": 1, "ts": 0, "pid": 1, "tid": 0, "bp": "x"},
    {"ph": "M", "name": "thread_name", "pid": 1, "args": {"name": "stream 0"}},             # no tid
    {"ph": "M", "name": "process_sort_index", "pid": 1, "tid": 0, "args": {"sort_index": "1"}},
    {"ph": "Q", "name": "k", "ts": 0, "pid": 1, "tid": 0},                                  # unknown phase
])
def test_schema_rejects_broken_events(bad):
    doc = {"traceEvents": [bad]}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, SCHEMA)


def _enclosing(slices, e):
    same_track = [x for x in slices if (x["pid"], x["tid"]) == (e["pid"], e["tid"])]
    return [x for x in same_track if x["ts"] <= e["ts"] <= x["ts"] + x["dur"]]


def test_every_flow_has_one_start_and_one_end_inside_their_slices(run):
    result, doc = run
    events = doc["traceEvents"]
    starts = {e["id"]: e for e in events if e["ph"] == "s" and e["cat"] == "flow"}
    ends = {e["id"]: e for e in events if e["ph"] == "f" and e["cat"] == "flow"}
    assert starts and set(starts) == set(ends)
    assert len(starts) == sum(e["ph"] == "s" and e["cat"] == "flow" for e in events) == len(result.run.launches)
    slices = [e for e in events if e["ph"] == "X"]
    for fid, s in starts.items():
        f = ends[fid]
        assert (s["cat"], s["name"]) == (f["cat"], f["name"]) and f["bp"] == "e"
        launch, task = _enclosing(slices, s), _enclosing(slices, f)
        assert len(launch) == 1 and launch[0]["cat"] == "launch"
        assert task and (task[0]["name"] in launch[0]["name"] or launch[0]["name"].startswith("model execute"))


def test_every_wait_names_its_record_and_has_an_arrow_from_it(run):
    result, doc = run
    events = doc["traceEvents"]
    records = {e["args"]["record_id"]: e for e in events if e.get("cat") == "event" and e["args"]["kind"] == "record"}
    waits = [e for e in events if e.get("cat") == "event" and e["args"]["kind"] == "wait"]
    assert bool(waits) == (result.stats.num_streams > 1)   # the one-stream run has none
    assert len(records) == sum(e.get("cat") == "event" and e["args"]["kind"] == "record" for e in events)
    sync = [e for e in events if e.get("cat") == "sync"]
    starts = {e["id"]: e for e in sync if e["ph"] == "s"}
    ends = {e["id"]: e for e in sync if e["ph"] == "f"}
    assert len(starts) == len(ends) == len(waits) and set(starts) == set(ends)
    assert not set(starts) & {e["id"] for e in events if e.get("cat") == "flow"}
    by_place: dict = {}   # a stream may start several waits at one time (on records of other streams)
    for e in waits:
        by_place.setdefault((e["tid"], e["ts"]), []).append(e)
    for fid, f in ends.items():
        s = starts[fid]
        named = [(w, records[w["args"]["record_id"]]) for w in by_place[(f["tid"], f["ts"])]]   # records exist
        matches = [(w, r) for w, r in named if (r["tid"], r["ts"]) == (s["tid"], s["ts"])]
        assert matches   # the arrow starts at the record a wait there names, on its stream
        assert any(r["args"]["event"] == w["args"]["event"] and r["ts"] <= w["ts"] for w, r in matches)


def test_every_track_is_named(run):
    _, doc = run
    events = doc["traceEvents"]
    named = {(e["pid"], e["tid"]) for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    procs = {e["pid"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    assert {(e["pid"], e["tid"]) for e in events if e["ph"] == "X"} <= named
    assert {e["pid"] for e in events if e["ph"] in ("X", "C")} <= procs


def _counter(doc, name, key):
    return [(e["ts"], e["args"][key]) for e in doc["traceEvents"] if e["ph"] == "C" and e["name"] == name]


def test_queue_depth_per_stream_returns_to_zero_and_matches_stats(run):
    result, doc = run
    tracks = {e["name"] for e in doc["traceEvents"] if e["ph"] == "C" and e["name"].startswith("queue depth")}
    assert tracks == {f"queue depth (stream {s})" for s in range(result.stats.num_streams)}
    for name in tracks:
        series = _counter(doc, name, "tasks")
        assert series[-1][1] == 0 and min(v for _, v in series) >= 0
    total = _counter(doc, QUEUE_COUNTER, "tasks")
    for t, v in total:   # the all-streams track is the sum of the per-stream ones
        assert v == sum(level_at(_counter(doc, n, "tasks"), t) for n in tracks)
    assert max(v for _, v in total) >= result.stats.max_queue_depth >= 1


def test_busy_cores_stay_within_the_device(run):
    result, doc = run
    p = result.run.profile
    cores = [e["args"] for e in doc["traceEvents"] if e["ph"] == "C" and e["name"] == CORES_COUNTER]
    assert cores and max(c["cube"] + c["vector"] for c in cores) > 0
    for c in cores:
        assert 0 <= c["cube"] <= p.ai_cores and 0 <= c["vector"] <= (p.ai_cores if p.coupled else p.vector_cores)
        if p.coupled:
            assert c["cube"] + c["vector"] <= p.ai_cores


def test_pool_bytes_peak_is_the_executed_live_peak(run):
    result, doc = run
    series = _counter(doc, POOL_COUNTER, "bytes")
    assert max(v for _, v in series) == result.stats.lower_bound_bytes
    assert series[-1][1] == 0


def test_the_result_trace_is_left_as_it_was(run):
    result, _ = run
    before = copy.deepcopy(result.trace)
    doc = timeline(result.run, result.trace)
    assert result.trace == before
    names = {e["name"] for e in doc["traceEvents"] if e["ph"] == "C"}
    assert {CORES_COUNTER, QUEUE_COUNTER, POOL_COUNTER, HBM_COUNTER} <= names
    assert len(names) == 4 + result.stats.num_streams


def test_hbm_counter_moves_the_run_bytes(run):
    """The HBM track integrates to the bytes the kernels move (GB/s x us = 1e3 bytes)."""
    result, doc = run
    series = _counter(doc, HBM_COUNTER, "GB/s")
    moved = sum(v * (t1 - t0) for (t0, v), (t1, _) in zip(series, series[1:])) * 1e3
    kernels = [t for t in result.run.tasks if t.kind == "kernel" and t.end_t > t.start_t]
    assert moved == pytest.approx(sum(t.bytes for t in kernels), rel=1e-6)
    assert series[-1][1] == pytest.approx(0, abs=1e-9)


def test_busy_cores_without_samples_come_from_the_tasks(run):
    from graphexec.profiling.counters import busy_cores

    result, _ = run
    p = result.run.profile
    steps = busy_cores(result.run.tasks, [], p)
    assert steps and max(c + v for _, c, v in steps) > 0 and steps[-1][1:] == (0, 0)
    assert all(0 <= c <= p.ai_cores and 0 <= v <= (p.ai_cores if p.coupled else p.vector_cores) for _, c, v in steps)
