"""Sweeps (``gx.sweep``, ``graphexec sweep``): rows equal individual Session runs, the same
on one process, a process pool and Ray; resumable after SIGINT; errors are rows.

The "three light models" are the small ones of onnx's light set (SqueezeNet, ZFNet-512,
AlexNet), all timing-only, so the grid of 36 points takes seconds."""

from __future__ import annotations

import csv
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import graphexec as gx
from graphexec.sweep.output import parse
from graphexec.sweep.point import TIMES, digest

ROOT = Path(__file__).resolve().parents[2]
LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
THREE = [LIGHT / f"light_{m}.onnx" for m in ("squeezenet", "zfnet512", "bvlc_alexnet")]
GRID = dict(device=["ascend910", "ascend910b"], streams=[1, 2, 4], policy=["ge", "list"])


def _same(rows):
    """The rows less their host seconds (the one thing that differs between runs)."""
    return [{k: v for k, v in r.items() if k not in TIMES} for r in rows]


@pytest.fixture(scope="module")
def local_rows():
    return gx.sweep(THREE, **GRID, workers=2)


def test_rows_equal_individual_sessions(local_rows):
    assert len(local_rows) == 3 * 2 * 3 * 2
    assert [r["model"] for r in local_rows[:12]] == ["light_squeezenet"] * 12   # model outermost, grid order
    graphs = {p.stem: gx.load(p) for p in THREE}
    for r in local_rows:
        assert r["error"] is None, r
        result = gx.Session(graphs[r["model"]], streams=int(r["streams"]), device=r["device"],
                            policy=r["policy"]).simulate()
        s = result.stats
        assert (r["makespan_us"], r["lower_bound_us"], r["num_tasks"], r["num_events"], r["peak_bytes"]) == \
            (s.makespan_us, s.lower_bound_us, s.num_tasks, s.num_events, s.peak_bytes)
        assert (r["cube_utilization"], r["cause"]) == (s.cube_utilization, result.diagnosis.reason)
        base = next(b for b in local_rows if (b["model"], b["device"]) == (r["model"], r["device"]))   # 1 stream
        assert r["speedup"] == base["makespan_us"] / r["makespan_us"]
    # and a full run (computed) of two points gives the same numbers
    for r in (local_rows[0], local_rows[-1]):
        g = graphs[r["model"]]
        ran = gx.Session(g, streams=int(r["streams"]), device=r["device"], policy=r["policy"]).run(gx.default_feeds(g))
        assert ran.stats.makespan_us == r["makespan_us"]


def test_one_process_gives_the_pool_rows(local_rows):
    assert _same(gx.sweep(THREE, **GRID, workers=1)) == _same(local_rows)


def test_ray_gives_the_same_rows_and_reruns_a_dead_workers_point(local_rows, tmp_path):
    ray = pytest.importorskip("ray")
    from graphexec.sweep.grid import grid
    from graphexec.sweep.point import Job
    from graphexec.sweep.ray_backend import RayBackend, ray_work

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        rows = gx.sweep(THREE, **GRID, backend="ray")
        marker = tmp_path / "died"

        def die_once(box, job):   # shipped by value to the worker: its process exits the first time
            if not marker.exists():
                marker.write_text("x")
                os._exit(1)
            return ray_work(box, job)

        backend = RayBackend()
        backend.task = ray.remote(max_retries=0)(die_once)   # no retry by Ray: the backend's own resubmission
        jobs = [Job(p) for p in grid([THREE[0].stem], ["ascend910"], [1, 2], [None], [1], ["data"])]
        again = list(backend.rows({THREE[0].stem: THREE[0]}, jobs))
    finally:
        ray.shutdown()
    assert _same(rows) == _same(local_rows)
    assert marker.exists() and [r["error"] for r in again] == [None, None]
    alone = gx.sweep(THREE[0], streams=[1, 2], workers=1)
    assert [r["makespan_us"] for r in again] == [r["makespan_us"] for r in alone]


def _cli(*args, **kw):
    return subprocess.run([sys.executable, str(ROOT / "cli.py"), *args], capture_output=True, text=True,
                          cwd=ROOT, **kw)


def _read(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_sigint_mid_sweep_loses_no_row_and_repeats_none(tmp_path):
    out = tmp_path / "rows.csv"
    args = [str(LIGHT / "light_squeezenet.onnx"), str(ROOT / "models" / "inception_block.onnx"),
            "--device", "ascend910,ascend910b,ascend310p", "--streams", "1,2,3,4", "--policy", "ge,chains,list,auto",
            "--output", str(out), "--workers", "2"]
    proc = subprocess.Popen([sys.executable, str(ROOT / "cli.py"), "sweep", *args], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline and (not out.exists() or len(out.read_text().splitlines()) < 6):
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    first = _read(out)
    assert 5 <= len(first) < 96, len(first)   # interrupted mid-sweep, with finished rows kept
    keys = [tuple(r[c] for c in ("model", "device", "streams", "policy")) for r in first]
    assert len(set(keys)) == len(keys)
    done = _cli("sweep", *args)
    assert done.returncode == 0, done.stderr
    rows = _read(out)
    assert rows[:len(first)] == first and len(rows) == 96   # the first rows kept as written, the rest added once
    whole = gx.sweep([LIGHT / "light_squeezenet.onnx", ROOT / "models" / "inception_block.onnx"],
                     device=["ascend910", "ascend910b", "ascend310p"], streams=[1, 2, 3, 4],
                     policy=["ge", "chains", "list", "auto"], workers=1)
    assert _same([parse(r) for r in rows]) == _same(whole)


def test_a_rerun_with_the_whole_output_runs_nothing(tmp_path):
    out = tmp_path / "rows.csv"
    first = gx.sweep(THREE[:1], streams=[1, 2], output=out, workers=1)
    calls = []
    again = gx.sweep(THREE[:1], streams=[1, 2], output=out, workers=1, progress=lambda d, n, w: calls.append((d, n)))
    assert _same(again) == _same(first) and again == first
    assert calls == [(2, 2)]   # both points were in the output: none ran


def test_errors_are_rows_and_the_sweep_goes_on(tmp_path):
    rows = gx.sweep(THREE[:1], device=["ascend910", "nosuchchip"], streams=[1, 100000], workers=1)
    by = {(r["device"], r["streams"]): r for r in rows}
    assert by[("ascend910", "1")]["error"] is None
    assert "100000" in by[("ascend910", "100000")]["error"]
    assert "nosuchchip" in by[("nosuchchip", "1")]["error"]
    assert all("\n" not in (r["error"] or "") for r in rows)
    bad = tmp_path / "broken.onnx"
    bad.write_bytes(b"not a model")
    rows = gx.sweep([bad, THREE[0]], workers=1)
    assert rows[0]["error"] and rows[0]["makespan_us"] is None and rows[1]["error"] is None


def test_control_flow_model_is_computed_and_says_so(tmp_path):
    then = helper.make_graph([helper.make_node("Neg", ["x"], ["t"])], "then", [],
                             [helper.make_tensor_value_info("t", TensorProto.FLOAT, [4])])
    other = helper.make_graph([helper.make_node("Abs", ["x"], ["e"])], "else", [],
                              [helper.make_tensor_value_info("e", TensorProto.FLOAT, [4])])
    g = helper.make_graph([helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
                           helper.make_node("Cast", ["s"], ["c"], to=TensorProto.BOOL),
                           helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)], "if",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])])
    path = tmp_path / "if.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)
    (row,) = gx.sweep(path, workers=1)
    assert row["error"] is None and row["computed"].startswith("control flow (If")
    graph = gx.load(path)
    ran = gx.Session(graph).run(gx.default_feeds(graph))
    assert row["makespan_us"] == ran.stats.makespan_us


def test_cli_sweep_verify_plot_json_and_bad_options(tmp_path):
    plot = tmp_path / "sweep.png"
    proc = _cli("sweep", str(THREE[0]), "--streams", "1,4", "--policy", "ge,list", "--verify", "--workers", "1",
                "--plot", str(plot))
    assert proc.returncode == 0, proc.stderr
    assert "4 points, 0 failed" in proc.stdout and plot.stat().st_size > 1000
    rows = gx.sweep(THREE[0], streams=[1, 4], policy=["ge", "list"], verify=True, workers=1)
    assert [r["verified"] for r in rows] == ["yes"] * 4 and len({r["outputs_sha256"] for r in rows}) == 1
    bad = [("--policy", "nope"), ("--streams", "0"), ("--output", str(tmp_path / "x.txt")), ("--parallel", "diagonal")]
    for flag, value in bad:
        proc = _cli("sweep", str(THREE[0]), flag, value)
        assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, (flag, proc.stderr)
    proc = _cli("sweep", str(tmp_path / "missing.onnx"))
    assert proc.returncode == 2 and "missing.onnx" in proc.stderr


def test_parquet_output_resumes(tmp_path):
    pytest.importorskip("pyarrow")
    out = tmp_path / "rows.parquet"
    first = gx.sweep(THREE[:1], streams=[1, 2], output=out, workers=1)
    more = gx.sweep(THREE[:1], streams=[1, 2, 4], output=out, workers=1)
    assert more[:2] == first and len(more) == 3
    import pyarrow.parquet as pq
    assert pq.read_table(out).num_rows == 3


def test_a_dead_worker_costs_a_retry_not_a_row(tmp_path):
    """A kernel that kills its process the first time: the pool breaks, the point reruns."""
    marker = tmp_path / "died"

    @gx.kernel("SweepDieOnce", shape="same")
    def die_once(x):
        if not marker.exists():
            marker.write_text("x")
            os._exit(1)
        return x + 1

    g = helper.make_graph([helper.make_node("SweepDieOnce", ["x"], ["y"], domain="graphexec.custom")], "die",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])])
    path = tmp_path / "die.onnx"
    opsets = [helper.make_opsetid("", 13), helper.make_opsetid("graphexec.custom", 1)]
    onnx.save(helper.make_model(g, opset_imports=opsets), path)
    rows = gx.sweep(path, streams=[1, 2], verify=True, workers=2)
    assert marker.exists()
    assert [r["error"] for r in rows] == [None, None] and [r["verified"] for r in rows] == ["yes", "yes"]
    x = (np.arange(4) / 4).astype(np.float32)   # the default input (arange(n) / n)
    assert rows[0]["outputs_sha256"] == digest({"y": x + 1})


def test_progress_bar_only_on_a_terminal():
    import pty

    args = [sys.executable, str(ROOT / "cli.py"), "sweep", str(THREE[0]), "--streams", "1,2,4", "--workers", "1"]
    quiet = subprocess.run(args, capture_output=True, text=True, cwd=ROOT)
    assert quiet.returncode == 0 and quiet.stderr == ""
    master, slave = pty.openpty()
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=slave, cwd=ROOT,
                            env={**os.environ, "COLUMNS": "120", "TERM": "xterm"})
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 4096)
        except OSError:   # the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=60)
    os.close(master)
    drawn = b"".join(chunks).decode(errors="replace")
    assert proc.returncode == 0
    assert "/3" in drawn and "light_squeezenet" in drawn   # "n/3" points done and the point being run


def test_cli_run_and_compare_timing_only_give_the_full_numbers(tmp_path):
    import json

    model = str(THREE[0])
    full = json.loads(_cli("run", model, "--streams", "4", "--json").stdout)
    timing = json.loads(_cli("run", model, "--streams", "4", "--json", "--timing-only").stdout)
    assert timing["outputs"] == {} and full["outputs"]
    for d in (full, timing):
        d["stats"].pop("compile_s")
    assert timing["stats"] == full["stats"] and timing["diagnosis"] == full["diagnosis"]
    cmp_full = _cli("compare", model, "--streams", "1,4").stdout.splitlines()
    cmp_timing = _cli("compare", model, "--streams", "1,4", "--timing-only").stdout.splitlines()
    assert cmp_timing[:-1] == cmp_full[:-1]   # the same table
    assert cmp_timing[-1] == "timing only: outputs not computed" and "bit-identical" in cmp_full[-1]
    refused = _cli("run", model, "--timing-only", "--save", str(tmp_path / "o.npz"))
    assert refused.returncode == 2 and "--save" in refused.stderr and len(refused.stderr.splitlines()) == 1


def test_someone_elses_csv_is_refused_and_left_whole(tmp_path):
    foreign = tmp_path / "scores.csv"
    foreign.write_bytes(b"name,score\nalice,1\nbob,2")   # no newline at the end: it used to lose 'bob,2'
    with pytest.raises(gx.GraphExecError, match="not a sweep's output"):
        gx.sweep(THREE[:1], device=["ascend910"], streams=[1], policy=["ge"], output=str(foreign), workers=1)
    assert foreign.read_bytes() == b"name,score\nalice,1\nbob,2"


def test_a_resumed_sweep_at_another_batch_runs_its_points_again(tmp_path):
    out = tmp_path / "r.csv"
    kw = dict(device=["ascend910"], streams=[1], policy=["ge"], output=str(out), workers=1)
    one = gx.sweep(THREE[:1], batch=1, **kw)
    four = gx.sweep(THREE[:1], batch=4, **kw)
    assert four[0]["batch"] == 4 and one[0]["batch"] == 1
    assert four[0]["makespan_us"] > one[0]["makespan_us"]   # it ran at batch 4, not read back batch 1's row
    assert gx.sweep(THREE[:1], batch=4, **kw) == four        # and resuming at batch 4 now finds its row


def test_only_the_point_that_kills_its_worker_is_blamed(tmp_path):
    """A slow point shares the pool with one whose kernel always kills its process: the pool
    breaks while the slow one runs; the slow one's row is whole, the killer's is the error."""

    @gx.kernel("SweepSlow", shape="same")
    def slow(x):
        time.sleep(1.0)
        return x + 1

    @gx.kernel("SweepDieAlways", shape="same")
    def die(x):
        os._exit(1)

    paths = []
    for op in ("SweepSlow", "SweepDieAlways"):
        g = helper.make_graph([helper.make_node(op, ["x"], ["y"], domain="graphexec.custom")], op,
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])])
        paths.append(tmp_path / f"{op}.onnx")
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13),
                                                      helper.make_opsetid("graphexec.custom", 1)]), paths[-1])
    rows = gx.sweep(paths, verify=True, workers=2)
    assert rows[0]["error"] is None and rows[0]["verified"] == "yes"
    assert "worker process died" in rows[1]["error"]


def test_a_bug_loading_a_model_is_its_rows_error_not_the_sweeps_end(monkeypatch):
    from graphexec.sweep import local as sweep_local

    real = sweep_local.load_cached

    def flaky(path):
        if "zfnet" in path:
            raise KeyError("")   # an internal bug with an empty message
        return real(path)

    monkeypatch.setattr(sweep_local, "load_cached", flaky)
    rows = gx.sweep(THREE[:2], workers=1)
    assert rows[0]["error"] is None
    assert rows[1]["error"] == "internal error: KeyError: ''"


def test_parquet_rows_batched_yet_none_lost_on_interrupt(tmp_path, monkeypatch):
    """Parquet is rewritten at most once a second; an interrupted sweep still leaves every
    finished row in the file (written when the sweep unwinds), and resuming repeats none."""
    pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    from graphexec.sweep import output as sweep_output

    monkeypatch.setattr(sweep_output, "FLUSH_S", 3600.0)   # only the first row and the unwind write
    out = tmp_path / "rows.parquet"

    def stop_after_two(done, total, what):
        if done == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        gx.sweep(THREE[:1], streams=[1, 2, 4], output=out, workers=1, progress=stop_after_two)
    assert pq.read_table(out).num_rows == 2
    rows = gx.sweep(THREE[:1], streams=[1, 2, 4], output=out, workers=1)
    assert pq.read_table(out).num_rows == 3 and [r["streams"] for r in rows] == ["1", "2", "4"]


def _dies_on_job_0(path, job):
    if job.i == 0:
        os._exit(1)
    return {"i": job.i}


def test_a_worker_dying_while_points_are_handed_in_costs_only_its_point(monkeypatch):
    """The pool can break before every point is submitted (a worker dies at once): the
    points not handed in yet run on a new pool, the killer alone is the error row."""
    import types

    from graphexec.sweep import local as sweep_local

    class SlowToHandIn(sweep_local.ProcessPoolExecutor):
        """The first pool's second submit waits until that pool has broken (deterministically
        mid-submission, as a fast-dying worker does on a long sweep); later pools hand in at once."""

        pools = 0

        def __init__(self, *args, **kw):
            super().__init__(*args, **kw)
            self._first, self._handed = SlowToHandIn.pools == 0, False
            SlowToHandIn.pools += 1

        def submit(self, fn, *args, **kw):
            if self._first and self._handed:
                deadline = time.monotonic() + 10
                while not self._broken and time.monotonic() < deadline:
                    time.sleep(0.01)
            self._handed = True
            return super().submit(fn, *args, **kw)

    monkeypatch.setattr(sweep_local, "ProcessPoolExecutor", SlowToHandIn)
    monkeypatch.setattr(sweep_local, "work", _dies_on_job_0)
    monkeypatch.setattr(sweep_local, "_lost", lambda job: {"lost": job.i})
    jobs = [types.SimpleNamespace(i=i, point=types.SimpleNamespace(model="m")) for i in range(30)]
    rows = list(sweep_local.LocalBackend(2).rows({"m": Path("unused")}, jobs))
    assert rows == [{"lost": 0}] + [{"i": i} for i in range(1, 30)]


def test_a_parquet_row_waits_at_most_a_flush_interval(tmp_path, monkeypatch):
    """A row that finishes right after a rewrite is written by a timer if no row follows
    (it used to wait, unwritten, for the next row or the end of the sweep)."""
    pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    from graphexec.sweep import output as sweep_output

    monkeypatch.setattr(sweep_output, "FLUSH_S", 0.2)
    rows = gx.sweep(THREE[:1], streams=[1, 2], workers=1)
    out = sweep_output.open_output(tmp_path / "rows.parquet")
    out.append(rows[0])   # written at once: the first row
    out.append(rows[1])   # within the interval: left to the timer
    assert pq.read_table(tmp_path / "rows.parquet").num_rows == 1
    deadline = time.monotonic() + 10
    while pq.read_table(tmp_path / "rows.parquet").num_rows < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert pq.read_table(tmp_path / "rows.parquet").num_rows == 2
    out.close()


def test_gx_sweep_is_the_function_and_the_package_alike():
    """``gx.sweep(...)`` runs a sweep, and ``graphexec.sweep`` is still the package: the
    function does not hide its modules."""
    import inspect
    import sys

    import graphexec.sweep.grid

    assert gx.sweep is sys.modules["graphexec.sweep"] and gx.sweep.grid is graphexec.sweep.grid
    assert callable(gx.sweep) and "models" in inspect.signature(gx.sweep).parameters
    (row,) = gx.sweep(THREE[0], streams=[1], workers=1)
    assert row["makespan_us"] > 0
