"""ASCEND_PROFILING_ENABLED=1 profiles a plain script that never asks for it: one PROF folder
in msprof's layout, written whole at exit; a bad output path is one warning line and the
script's results are untouched."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import jsonschema

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((ROOT / "schemas" / "trace_event.schema.json").read_text())
SCRIPT = textwrap.dedent("""
    import sys
    sys.path[:0] = [{root!r}, {tests!r}]   # this checkout's graphexec, not whichever is installed
    import numpy as np
    import graphexec as gx
    from graphexec import acl
    from profiling_graphs import tiny_chain
    g = tiny_chain(n=10)
    session = gx.Session(g, streams=1, launch="host")
    for _ in range(2):
        result = session.run(gx.default_feeds(g))
    acl.init()
    acl.set_device(0)
    out = acl.malloc(64)
    acl.launch_kernel(lambda: acl.view(out, np.uint8, (64,)).fill(3), 1, None, writes=[out], flops=1e6)
    acl.synchronize_device()
    acl.reset_device(0)
    acl.finalize()
    print("sum", float(result.outputs["y"].sum()))
""")


def _run(tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    script = tmp_path / "run_model.py"
    script.write_text(SCRIPT.format(root=str(ROOT), tests=str(ROOT / "tests")))
    full = {**os.environ, **env}
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path, env=full,
                          timeout=300)


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_the_switch_writes_msprofs_layout_with_every_run(tmp_path):
    out = tmp_path / "profiling_output"
    p = _run(tmp_path, {"ASCEND_PROFILING_ENABLED": "1", "ASCEND_PROFILING_OUTPUT_PATH": str(out)})
    assert p.returncode == 0 and p.stderr == "", p.stderr
    assert p.stdout.startswith("sum ")
    (prof,) = list(out.iterdir())
    assert prof.name == f"PROF_{prof.name.split('_')[1]}_{prof.name.split('_')[2]}"
    stamp, pid = prof.name.split("_")[1:]
    assert len(stamp) == 14 and stamp.isdigit() and pid.isdigit()
    assert {p.name for p in prof.iterdir()} == {"device_0", "host", "mindstudio_profiler_output"}
    files = {f.name for f in (prof / "mindstudio_profiler_output").iterdir()}
    assert files == {f"msprof_{stamp}.json", f"op_summary_{stamp}.csv", f"op_statistic_{stamp}.csv", "README.txt"}
    doc = json.loads((prof / "mindstudio_profiler_output" / f"msprof_{stamp}.json").read_text())
    jsonschema.validate(doc, SCHEMA)
    runs = doc["otherData"]["runs"]
    assert [r["model"] for r in runs] == ["tiny_chain", "tiny_chain", "acl"]
    assert "diagnosis" in runs[1] and runs[1]["diagnosis"]["reason"] == "launch"   # once per plan, its last run
    kernels = [e for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "kernel"]
    assert len(kernels) == 10 + 10 + 1
    assert len({e["pid"] for e in kernels}) == 1                     # one device, its runs steps on one clock
    assert [r["step"] for r in runs] == [1, 2, 3]
    rows = _rows(prof / "mindstudio_profiler_output" / f"op_summary_{stamp}.csv")
    assert len(rows) == 21 and {r["Device_id"] for r in rows} == {"0"}
    assert [r["Model Name"] for r in rows].count("tiny_chain") == 20
    stats = _rows(prof / "mindstudio_profiler_output" / f"op_statistic_{stamp}.csv")
    assert sum(int(r["Count"]) for r in stats if r["Model Name"] == "tiny_chain") == 20
    assert not [f for f in out.iterdir() if f.name.startswith(".")]   # no temporary folder left


def test_a_bad_output_path_is_one_warning_and_the_results_stay(tmp_path):
    (tmp_path / "file").write_text("not a folder")
    bad = tmp_path / "file" / "out"
    p = _run(tmp_path, {"ASCEND_PROFILING_ENABLED": "1", "ASCEND_PROFILING_OUTPUT_PATH": str(bad)})
    plain = _run(tmp_path, {"ASCEND_PROFILING_ENABLED": "0"})
    assert p.returncode == 0 and p.stdout == plain.stdout
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "ASCEND_PROFILING_OUTPUT_PATH" in lines[0] and str(bad) in lines[0], p.stderr
    assert "Traceback" not in p.stderr


def test_off_writes_nothing(tmp_path):
    p = _run(tmp_path, {"ASCEND_PROFILING_ENABLED": "0", "ASCEND_PROFILING_OUTPUT_PATH": str(tmp_path / "o")})
    assert p.returncode == 0 and not (tmp_path / "o").exists()


def test_an_eager_program_is_profiled_too(tmp_path):
    script = tmp_path / "eager.py"
    script.write_text(textwrap.dedent("""
        import graphexec.npu as npu
        x = npu.randn(64, 64).npu()
        y = npu.ops.relu(x @ x)
        print(float(y.cpu().numpy().sum()) >= 0)
    """))
    env = {**os.environ, "ASCEND_PROFILING_ENABLED": "1", "ASCEND_PROFILING_OUTPUT_PATH": str(tmp_path / "out")}
    p = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0 and p.stdout.strip() == "True" and p.stderr == "", p.stderr
    (prof,) = list((tmp_path / "out").iterdir())
    rows = _rows(next((prof / "mindstudio_profiler_output").glob("op_summary_*.csv")))
    assert {r["Model Name"] for r in rows} == {"eager"}
    assert [r["OP Type"] for r in rows if r["Task Type"] != "MEMCPY_ASYNC"] == ["MatMul", "Relu"]
