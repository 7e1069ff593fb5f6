"""The actions reach every face: the run summary, --json, the profile's timeline and the
HTML report; and running with an advised flag gives the makespan the advice measured."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "models" / "inception_block.onnx"


def cli(*args: str) -> subprocess.CompletedProcess:
    p = subprocess.run([sys.executable, str(ROOT / "cli.py"), *args], capture_output=True, text=True, cwd=ROOT,
                       timeout=300)
    assert p.returncode == 0, p.stderr
    return p


def test_the_summary_lists_the_actions_with_gain_and_flag():
    out = cli("run", str(MODEL), "--fusion", "off", "--timing-only").stdout
    assert "actions (measured by re-simulation, best first):" in out
    line = next(ln for ln in out.splitlines() if ln.strip().startswith("fusion "))
    assert "--fusion on" in line and "Session(fusion=True)" in line


def test_an_advised_flag_gives_the_makespan_it_was_measured_at():
    doc = json.loads(cli("run", str(MODEL), "--fusion", "off", "--timing-only", "--json").stdout)
    fusion = next(a for a in doc["diagnosis"]["actions"] if a["name"] == "fusion")
    after = json.loads(cli("run", str(MODEL), *fusion["flag"].split(), "--timing-only", "--json").stdout)
    assert after["stats"]["makespan_us"] == pytest.approx(fusion["makespan_us"], rel=1e-9)
    assert not any(a["name"] == "fusion" for a in after["diagnosis"]["actions"])   # now in effect


def test_the_profile_and_the_report_carry_the_actions(tmp_path):
    cli("run", str(MODEL), "--fusion", "off", "--timing-only", "--profile", str(tmp_path / "prof"))
    other = json.loads((tmp_path / "prof" / "timeline.json").read_text())["otherData"]
    assert any(a["name"] == "fusion" and a["flag"] == "--fusion on" for a in other["diagnosis"]["actions"])
    cli("view", str(tmp_path / "prof"), "-o", str(tmp_path / "r.html"))
    page = (tmp_path / "r.html").read_text()
    assert "Actions: settings ranked by measured gain" in page and '<table class="actions">' in page
    assert "--fusion on" in page and "task_overhead_us = " in page
