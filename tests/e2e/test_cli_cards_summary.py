"""A multi-card run's summary adds up, typed as a user types it: the makespan is printed as
its parts (host copies in and out, compute, communication no compute hid, nothing busy)
that sum to it, each card's idle time and the pipeline bubble are printed, the header
names the cards, weights are all cards', a node is named once however many micro-batches
ran it, and a tensor-parallel run says why it split nothing."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

ROOT = Path(__file__).resolve().parents[2]
MODEL = str(ROOT / "models" / "inception_block.onnx")
SCHEMA = json.loads((ROOT / "schemas" / "cli.schema.json").read_text())
PIPELINE = ["--devices", "2", "--parallel", "pipeline", "--microbatches", "2", "--shape", "data=4,192,28,28",
            "--timing-only"]


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "graphexec", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=300)


def test_pipeline_summary_adds_up_and_names_its_parts():
    p = cli("run", MODEL, *PIPELINE)
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert "on 2 x ascend910 (atlas800-910), parallel pipeline, 1 stream(s) per card, 2 micro-batch(es)" in out
    m = re.search(r"makespan ([\d,.]+) us = host copies in ([\d,.]+) \+ compute ([\d,.]+) \+ communication not "
                  r"hidden ([\d,.]+) \+ host copies out ([\d,.]+) \+ no card busy ([\d,.]+)", out)
    assert m, out
    total, *parts = (float(x.replace(",", "")) for x in m.groups())
    assert sum(parts) == pytest.approx(total, abs=0.3)
    assert re.search(r"simulated device time " + re.escape(m.group(1)) + " us", out)   # the same makespan
    assert re.search(r"idle while another card works: card 0 [\d,.]+ us, card 1 [\d,.]+ us; pipeline bubble", out)
    assert "weights" in out and "on all cards together" in out and "the card that bounds the makespan" in out
    doc = json.loads(cli("run", MODEL, *PIPELINE, "--json").stdout)
    jsonschema.Draft202012Validator(SCHEMA).validate(doc)
    assert sum(doc["makespan_parts_us"].values()) == pytest.approx(doc["stats"]["makespan_us"], rel=1e-9)
    assert set(doc["card_idle_us"]) == {"0", "1"}


def test_ops_that_matter_name_a_node_once():
    p = cli("run", MODEL, "--devices", "2", "--parallel", "pipeline", "--microbatches", "4", "--shape",
            "data=8,192,28,28", "--timing-only")
    line = next((x for x in p.stdout.splitlines() if "ops that matter" in x), "")
    names = re.findall(r"(\S+) \(\w+, [\d,.]+ us", line)
    assert len(names) == len(set(names)), line


def test_tensor_parallel_says_why_nothing_was_split():
    p = cli("compare", MODEL, "--devices", "2", "--parallel", "tensor", "--shape", "data=2,192,28,28",
            "--timing-only")
    assert p.returncode == 0, p.stderr
    assert re.search(r"2 cards: tensor parallel: nothing split, 6 kept whole: b1_1x1 \(Conv\): it would save "
                     r"[\d.]+ us of compute for [\d.]+ us of all_gather", p.stdout), p.stdout


@pytest.mark.parametrize("mode", [["--parallel", "data"], PIPELINE[2:6]])
def test_every_card_is_diagnosed_and_the_numbers_add_up(mode):
    """Each card's verdict is printed and in --json; the whole run's diagnosis is the card whose
    last task ends at the makespan; the op-type table counts every card's kernels."""
    args = ("run", MODEL, "--devices", "2", *mode, "--shape", "data=4,192,28,28", "--timing-only")
    p = cli(*args)
    assert p.returncode == 0, p.stderr
    verdicts = re.findall(r"^    card (\d)( \(critical\))?: (\w+) ([\d.]+)x, its last task ends at "
                          r"([\d,.]+) us", p.stdout,
                          re.M)
    assert [v[0] for v in verdicts] == ["0", "1"], p.stdout
    crit = re.search(r"diagnosis below: card (\d)'s run, the card that bounds the makespan", p.stdout)
    assert crit and [v[0] for v in verdicts if v[1]] == [crit.group(1)]
    assert "card 0's run (" not in p.stdout
    doc = json.loads(cli(*args, "--json").stdout)
    jsonschema.Draft202012Validator(SCHEMA).validate(doc)
    cards = doc["diagnosis"]["analyses"]["cards"]
    assert [c["device"] for c in cards] == [0, 1]
    ends = [c["end_us"] for c in cards]
    assert max(ends) == pytest.approx(doc["stats"]["makespan_us"], abs=0.05)   # the critical card bounds it
    assert doc["diagnosis"]["analyses"]["critical_card"] == ends.index(max(ends))
    assert doc["diagnosis"]["reason"] == cards[ends.index(max(ends))]["reason"]
    table = p.stdout.split("device time by op type (all cards):")[1].split("  diagnosis below")[0]
    rows = re.findall(r"^\s+(\w+)\s+(AI_CORE|AI_CPU)\s+(\d+)\s", table, re.M)
    shares = sum(float(x) for x in re.findall(r"([\d.]+)%$", table, re.M))
    assert shares == pytest.approx(100.0, abs=0.3)   # every op type is in the table
    assert sum(int(n) for *_, n in rows) == doc["stats"]["num_kernels"] + doc["stats"]["num_aicpu"]


def test_the_report_has_a_diagnosis_per_card(tmp_path):
    prof, html = tmp_path / "prof", tmp_path / "r.html"
    assert cli("run", MODEL, *PIPELINE, "--profile", str(prof)).returncode == 0
    p = cli("view", str(prof), "-o", str(html))
    assert p.returncode == 0, p.stderr
    page = html.read_text()
    assert 'id="diagnosis-card-0"' in page and 'id="diagnosis-card-1"' in page
    assert re.search(r"Diagnosis of card (\d) \(critical: it bounds the makespan\)", page)
    assert "the diagnosis is made on card 0's plan" not in page
