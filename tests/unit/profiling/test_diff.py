"""Two profiles side by side: op by op, cause by cause, the makespan difference explained."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import graphexec as gx
from graphexec.cli import main
from graphexec.profiling.diff import compare, compare_text
from graphexec.profiling.report_diff import render_diff
from graphexec.profiling.view_data import load

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    graph = gx.load(ROOT / "models" / "inception_block.onnx")
    x = np.random.default_rng(0).standard_normal((1, 192, 28, 28)).astype(np.float32)
    out = []
    for streams in (1, 4):
        result = gx.Session(graph, streams=streams).run({graph.inputs[0]: x})
        folder = tmp_path_factory.mktemp(f"s{streams}")
        result.write_profile(folder)
        out.append((folder, result))
    return out


def test_numbers_are_the_runs(pair):
    (fa, ra), (fb, rb) = pair
    d = compare(load(fa), load(fb))
    assert d["makespan"] == pytest.approx([ra.stats.makespan_us, rb.stats.makespan_us])
    for k in (0, 1):   # the makespan splits exactly into busy and idle
        assert d["busy"][k] + d["idle"][k] == pytest.approx(d["makespan"][k])
    conv = next(o for o in d["ops"] if o["op"] == "Conv")
    kernels = [e for e in rb.trace["traceEvents"] if e.get("cat") == "kernel" and e["args"]["op"] == "Conv"]
    assert conv["calls"][1] == len(kernels) and conv["us"][1] == pytest.approx(sum(e["dur"] for e in kernels))
    assert conv["bound"][0] in ("compute", "memory", "overhead")
    gains = {c["reason"]: c["gain"] for c in d["causes"]}
    dep = next(c.gain for c in ra.diagnosis.causes if c.reason == "dependency")
    assert gains["dependency"][0] == pytest.approx(dep)
    text = d["explanation"]
    assert f"{ra.stats.makespan_us:,.3f} -> {rb.stats.makespan_us:,.3f} us" in text and "Conv" in text
    assert "Conv" in compare_text(d) and 'id="diff-explanation"' in render_diff(d)


def test_cli_diff_and_view_of_two(pair, tmp_path, capsys):
    (fa, _), (fb, _) = pair
    assert main(["diff", str(fa), str(fb), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["ops"]
    page = tmp_path / "d.html"
    assert main(["view", str(fa), str(fb), "-o", str(page)]) == 0
    assert "two profiles side by side" in page.read_text()
