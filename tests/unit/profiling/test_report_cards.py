"""A multi-card profile is every card's: the tables hold each card's rows, each card has a
profile of its own, and the report shows the whole run or any one card (selector), with
each card's memory and op types from its own run; the trace is linked beside the report
for Perfetto. (The page's script is exercised in Chromium: tests/e2e/test_report_browser.py.)"""

from __future__ import annotations

import csv
import json
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import graphexec as gx
from graphexec.profiling.report_html import render, write_report
from graphexec.profiling.view_data import load

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory):
    graph = gx.load(ROOT / "models" / "inception_block.onnx")
    x = np.random.default_rng(0).standard_normal((2, 192, 28, 28)).astype(np.float32)
    result = gx.Session(graph, devices=2, parallel="pipeline", microbatches=2).run({graph.inputs[0]: x})
    folder = tmp_path_factory.mktemp("cards") / "p"
    result.write_profile(folder)
    return folder, result


@pytest.fixture(scope="module")
def report(pipeline, tmp_path_factory):
    """The report of the pipeline's profile, written in another folder than the profile's."""
    folder, _ = pipeline
    out = tmp_path_factory.mktemp("report") / "r.html"
    write_report(str(folder), str(out))
    return out


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_the_tables_hold_every_cards_rows_and_each_card_has_its_profile(pipeline):
    folder, result = pipeline
    whole, stat = _rows(folder / "op_summary.csv"), _rows(folder / "op_statistic.csv")
    for i, record in enumerate(result.records):
        own = _rows(folder / f"device_{record.device_id}" / "op_summary.csv")
        assert own and [r["Op Name"] for r in whole if r["Device_id"] == str(record.device_id)] == \
            [r["Op Name"] for r in own]
        counts = {r["OP Type"]: int(r["Count"]) for r in stat if r["Device_id"] == str(record.device_id)}
        assert counts == dict(Counter(r["OP Type"] for r in own))
        doc = json.loads((folder / f"device_{record.device_id}" / "timeline.json").read_text())
        assert doc["otherData"]["stats"]["makespan_us"] == pytest.approx(result.card_stats[i].makespan_us)
        assert doc["otherData"]["diagnosis"]["reason"] == result.card_diagnoses[i].reason
    assert {r["Device_id"] for r in whole} == {"0", "1"}


def test_the_report_shows_the_whole_run_and_each_card(pipeline, report):
    folder, _ = pipeline
    view = load(folder)
    page = report.read_text()
    assert '<option value="all">the whole run</option><option value="0">card 0</option>' \
           '<option value="1">card 1</option>' in page
    mems = json.loads((folder / "timeline.json").read_text())["otherData"]["card_memory"]
    assert [m["device"] for m in mems] == [0, 1]
    for m in mems:   # each card's own pool, in its own section
        d = m["device"]
        section = page.split(f'<div class="per-card" data-card="{d}">')[1]
        assert f'id="memory-peak-card-{d}">activation pool: {m["reserved_bytes"]:,} bytes reserved' in section
        assert m["peak_bytes"] <= m["reserved_bytes"]   # micro-batches' tensors are each their own run's
    top = max(mems, key=lambda m: m["peak_bytes"])
    assert f"{sum(m['reserved_bytes'] for m in mems):,} bytes reserved in all" in page
    assert f"the highest peak is card {top['device']}'s, {top['peak_bytes']:,} bytes" in page
    whole = page.split('class="sortable op-statistic"')[1].split("</table>")[0]
    counts = Counter(r["OP Type"] for r in view.rows)
    for op, n in counts.items():   # the whole run's op types are over every card's ops
        assert re.search(rf'<td>{op}</td><td class="n" data-v="{n}">', whole)
    assert page.count('class="sortable op-statistic-card"') == 2
    assert "<th>Device_id</th>" in page.split('class="sortable ops"')[1].split("</thead>")[0]


def test_a_cards_profile_is_a_one_card_report(pipeline):
    folder, result = pipeline
    page = render(load(folder / "device_1"))
    assert 'id="card-select"' not in page
    assert f'id="metric-makespan_us">{result.card_stats[1].makespan_us:,.1f} us<' in page


def test_the_trace_is_linked_for_perfetto_and_a_second_write_replaces_the_cards(pipeline, report):
    folder, result = pipeline
    href = re.search(r'<p id="perfetto">the whole trace: <a href="([^"]+)" download>', report.read_text()).group(1)
    assert (report.parent / href).resolve() == (folder / "timeline.json").resolve()
    (folder / "device_1" / "stale.txt").write_text("x")
    result.write_profile(folder)   # over the profile already there
    assert not (folder / "device_1" / "stale.txt").exists() and (folder / "device_1" / "timeline.json").is_file()
    graph = gx.load(ROOT / "models" / "inception_block.onnx")
    x = np.zeros((1, 192, 28, 28), np.float32)
    gx.Session(graph).run({graph.inputs[0]: x}).write_profile(folder)   # one card: no card folders stay
    assert not list(folder.glob("device_*"))
    result.write_profile(folder)


def test_a_bad_card_memory_is_one_line(pipeline, tmp_path):
    folder, _ = pipeline
    doc = json.loads((folder / "timeline.json").read_text())
    doc["otherData"]["card_memory"][1]["reserved_bytes"] = "lots"
    (tmp_path / "timeline.json").write_text(json.dumps(doc))
    bad = r"otherData\.card_memory\[1\]\.reserved_bytes: Input should be a valid number"
    with pytest.raises(gx.GraphExecError, match=bad):
        load(tmp_path / "timeline.json")
