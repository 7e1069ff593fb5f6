"""`graphexec run --profile DIR`, the diagnosis in the summary and in --json, and clean stderr."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import onnx
from profiling_graphs import tiny_chain

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "models" / "inception_block.onnx"
SCHEMA = json.loads((ROOT / "schemas" / "trace_event.schema.json").read_text())


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "cli.py"), *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=300)


def test_run_profile_writes_the_three_files(tmp_path):
    out = tmp_path / "prof"
    p = cli("run", str(MODEL), "--streams", "2", "--profile", str(out))
    assert p.returncode == 0, p.stderr
    assert sorted(f.name for f in out.iterdir()) == ["op_statistic.csv", "op_summary.csv", "timeline.json"]
    jsonschema.validate(json.loads((out / "timeline.json").read_text()), SCHEMA)
    with open(out / "op_summary.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    # the inception block fused (each Conv runs its Relu): 7 kernels
    assert len(rows) == 7 and {r["OP Type"] for r in rows} == {"Conv", "MaxPool"}
    assert not [f for f in tmp_path.iterdir() if f.name.startswith(".")]   # no temporary folder left
    assert p.stderr == ""                                                # no progress bar into a pipe


def test_summary_has_the_metrics_and_the_diagnosis_in_words():
    p = cli("run", str(MODEL))
    assert p.returncode == 0, p.stderr
    for text in ("utilization: cube", "HBM bandwidth", "mean depth", "waiting on the host", "OP Type",
                 "diagnosis: dispatch-bound"):
        assert text in p.stdout, text


def test_json_has_the_diagnosis_and_the_new_stats(tmp_path):
    model = tmp_path / "tiny.onnx"
    onnx.save(tiny_chain(n=30, proto=True), model)
    p = cli("run", str(model), "--json")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["diagnosis"]["reason"] == "dispatch" and doc["diagnosis"]["ops"] and doc["diagnosis"]["causes"]
    for key in ("mean_queue_depth", "max_queue_depth", "device_idle_us", "host_wait_us", "hbm_utilization"):
        assert key in doc["stats"]


def test_profile_into_an_existing_folder_replaces_only_its_files(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    (tmp_path / "op_summary.csv").write_text("old")
    p = cli("run", str(MODEL), "--profile", str(tmp_path))
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "notes.txt").read_text() == "mine"
    assert (tmp_path / "op_summary.csv").read_text().startswith("Op Name,OP Type,Task Type")


def test_profile_in_a_missing_folder_is_one_clean_line(tmp_path):
    target = tmp_path / "no" / "such" / "prof"
    p = cli("run", str(MODEL), "--profile", str(target))
    assert p.returncode == 2
    assert p.stderr.count("\n") == 1 and "does not exist" in p.stderr and "Traceback" not in p.stderr
    assert not target.parent.exists()


def test_compare_prints_an_aligned_table_and_no_progress_into_a_pipe():
    p = cli("compare", str(MODEL), "--streams", "1,2")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("streams"))
    assert set(lines[head + 1].replace(" ", "")) == {"-"}
    assert len({len(line) for line in lines[head:head + 4]}) == 1
    assert p.stderr == ""
