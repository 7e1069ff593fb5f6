"""The command line: the README's job, its outputs, and one clean line per bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "models" / "inception_block.onnx"


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "cli.py"), *args], capture_output=True, text=True,
                          cwd=cwd or ROOT, timeout=300)


def test_run_prints_summary():
    p = cli("run", str(MODEL))
    assert p.returncode == 0, p.stderr
    assert "output out: float32[1,256,28,28]" in p.stdout
    assert "simulated device time" in p.stdout and "tasks" in p.stdout


def test_run_json_save_and_trace(tmp_path):
    out, trace = tmp_path / "out.npz", tmp_path / "trace.json"
    p = cli("run", str(MODEL), "--shape", "data=2,192,28,28", "--json", "--save", str(out), "--trace", str(trace))
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["outputs"]["out"]["shape"] == [2, 256, 28, 28]
    assert doc["stats"]["num_tasks"] > 0 and doc["stats"]["makespan_us"] > 0
    assert np.load(out)["out"].shape == (2, 256, 28, 28)
    events = json.loads(trace.read_text())["traceEvents"]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    assert kernels and all({"node", "op", "inputs", "outputs", "cores"} <= set(e["args"]) for e in kernels)


def test_run_with_input_file_matches_api(tmp_path):
    import graphexec as gx

    x = np.random.default_rng(1).standard_normal((1, 192, 28, 28)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    p = cli("run", str(MODEL), "--input", f"data={tmp_path / 'x.npy'}", "--save", str(tmp_path / "o.npz"))
    assert p.returncode == 0, p.stderr
    expected = gx.Session(gx.load(MODEL)).run({"data": x}).outputs["out"]
    np.testing.assert_array_equal(np.load(tmp_path / "o.npz")["out"], expected)


def _bad_onnx(tmp_path: Path) -> dict[str, Path]:
    files = {"empty": tmp_path / "empty.onnx", "text": tmp_path / "text.onnx", "trunc": tmp_path / "trunc.onnx"}
    files["empty"].write_bytes(b"")
    files["text"].write_text("hello, I am not a model\n")
    files["trunc"].write_bytes(MODEL.read_bytes()[:1000])
    return files


@pytest.mark.parametrize("case,args,message", [
    ("missing", ["run", "nope.onnx"], "graphexec: error: nope.onnx: no such file"),
    ("dir", ["run", "models"], "graphexec: error: models: is a directory, not an ONNX file"),
    ("feed", ["run", str(MODEL), "--input", "bogus=x.npy"], "graphexec: error: --input bogus: x.npy: no such file"),
    ("shape", ["run", str(MODEL), "--shape", "data=1,a"],
     "graphexec: error: --shape data=1,a: dims must be integers separated by commas"),
    ("streams", ["run", str(MODEL), "--streams", "0"], "graphexec: error: streams must be >= 1, got 0"),
    ("device", ["run", str(MODEL), "--device", "tpu9"],
     "graphexec: error: unknown device 'tpu9'; known: ascend310p, ascend910, ascend910b, nvidia-a100, nvidia-h100, nvidia-v100 (or give a .yaml/.yml profile path)"),
])
def test_bad_input_one_line_exit_2(case, args, message):
    p = cli(*args)
    assert p.returncode == 2
    assert p.stderr.strip() == message
    assert "Traceback" not in p.stderr


def test_bad_files_exit_2(tmp_path):
    for kind, path in _bad_onnx(tmp_path).items():
        p = cli("run", str(path))
        assert p.returncode == 2, (kind, p.stderr)
        lines = p.stderr.strip().splitlines()
        assert len(lines) == 1 and str(path) in lines[0], (kind, p.stderr)


def test_failed_run_leaves_no_partial_output(tmp_path):
    out = tmp_path / "out.npz"
    out.write_bytes(b"previous")
    p = cli("run", str(MODEL), "--shape", "data=1,3,28,28", "--save", str(out))
    assert p.returncode == 2
    assert out.read_bytes() == b"previous"
    assert [f.name for f in tmp_path.iterdir()] == ["out.npz"]


def test_devices_json():
    p = cli("devices", "--json")
    assert p.returncode == 0
    doc = json.loads(p.stdout)
    assert {d["name"] for d in doc["devices"]} == {"ascend910", "ascend910b", "ascend310p", "nvidia-a100", "nvidia-h100",
                                                   "nvidia-v100"}
    assert {s["name"] for s in doc["systems"]} == {"atlas800-910", "atlas800t-a2", "atlas300i-duo", "dgx-a100", "dgx-h100"}


def test_compare_table_plot_and_json(tmp_path):
    plot = tmp_path / "gantt.png"
    p = cli("compare", str(MODEL), "--streams", "1,4", "--plot", str(plot))
    assert p.returncode == 0, p.stderr
    assert "speedup" in p.stdout and "outputs bit-identical across all rows" in p.stdout
    assert plot.read_bytes()[:4] == b"\x89PNG"
    p = cli("compare", str(MODEL), "--streams", "1,2", "--policy", "ge", "--json")
    rows = json.loads(p.stdout)["rows"]
    assert [r["streams"] for r in rows] == [1, 2] and rows[1]["policy"] == "ge"


def test_plan_shows_streams_events_and_memory():
    import onnx

    light = Path(onnx.__file__).parent / "backend/test/data/light/light_inception_v1.onnx"
    p = cli("plan", str(light), "--streams", "4", "--policy", "ge")
    assert p.returncode == 0, p.stderr
    assert "stream 3:" in p.stdout and "record e" in p.stdout and "wait   e" in p.stdout
    assert "memory: activation pool" in p.stdout


def test_compare_bad_stream_list():
    p = cli("compare", str(MODEL), "--streams", "1,x")
    assert p.returncode == 2 and p.stderr.strip() == "graphexec: error: --streams 'x': must be an integer >= 1 or 'auto'"


def test_python_m_graphexec_is_the_same_command_line():
    """`python -m graphexec` and the checkout's cli.py run one main; the console script points there too."""
    p = subprocess.run([sys.executable, "-m", "graphexec", "devices", "--json"], capture_output=True, text=True,
                       cwd=ROOT, timeout=300)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout) == json.loads(cli("devices", "--json").stdout)
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert 'graphexec = "graphexec.cli:main"' in pyproject and "py-modules" not in pyproject
