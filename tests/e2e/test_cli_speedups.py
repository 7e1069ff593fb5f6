"""Every speedup names its baseline and is over one stream on the same device (one card of
the same system for card counts), run silently when the rows or the grid lack it; a verdict
about rows needs two rows. Typed as a user types it (a subprocess)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MODEL = str(ROOT / "models" / "inception_block.onnx")


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "graphexec", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=300)


def test_compare_one_row_is_over_one_stream_run_silently():
    one = json.loads(cli("compare", MODEL, "--streams", "1", "--json").stdout)["rows"][0]
    p = cli("compare", MODEL, "--streams", "2", "--policy", "ge")
    assert p.returncode == 0, p.stderr
    assert f"speedup: over 1 stream ({one['makespan_us']:,.1f} us; run for the speedups, not a row)" in p.stdout
    assert "across all rows" not in p.stdout and "outputs bit-identical to the 1 stream baseline" in p.stdout
    doc = json.loads(cli("compare", MODEL, "--streams", "2", "--policy", "ge", "--json").stdout)
    assert doc["baseline"] == {"label": "1 stream", "makespan_us": one["makespan_us"], "row": False}
    assert doc["rows"][0]["speedup"] == pytest.approx(one["makespan_us"] / doc["rows"][0]["makespan_us"])
    assert doc["rows"][0]["speedup"] > 1.2


def test_compare_one_row_that_is_the_baseline_gives_no_verdict_about_rows():
    p = cli("compare", MODEL, "--streams", "1")
    assert p.returncode == 0 and "across all rows" not in p.stdout and "one row: no outputs to compare" in p.stdout
    assert "a row of the table" in p.stdout


def test_compare_speedup_is_over_one_stream_in_any_order():
    rows = json.loads(cli("compare", MODEL, "--streams", "4,1", "--json").stdout)["rows"]
    assert [r["streams"] for r in rows] == [4, 1] and rows[1]["speedup"] == 1.0 and rows[0]["speedup"] > 1.2


def test_sweep_speedup_is_over_one_stream_on_the_same_device_even_when_the_grid_lacks_it():
    base = {}
    for device in ("ascend910", "ascend910b"):
        r = json.loads(cli("compare", MODEL, "--streams", "1", "--device", device, "--json").stdout)["rows"][0]
        base[device] = r["makespan_us"]
    p = cli("sweep", MODEL, "--device", "ascend910,ascend910b", "--streams", "2,4", "--no-diagnosis", "--json")
    assert p.returncode == 0, p.stderr
    rows = json.loads(p.stdout)["rows"]
    assert [(r["device"], r["streams"]) for r in rows] == [(d, s) for d in base for s in (2, 4)]   # no extra rows
    for r in rows:
        assert r["speedup"] == pytest.approx(base[r["device"]] / r["makespan_us"])
    text = cli("sweep", MODEL, "--streams", "2", "--no-diagnosis").stdout
    assert "speedup vs 1 stream" in text and "at 1 stream on 1 card" in text
