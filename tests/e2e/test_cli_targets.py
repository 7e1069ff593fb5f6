"""``graphexec view -o`` and ``graphexec sweep --output/--plot`` refuse to write over what
they read (issue 21, class 2), and a device profile with an alias bomb is refused while
it is read (class 3), each as one line, exit 2."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import cli
from graphexec.errors import GraphExecError
from graphexec.runtime.profiles import load_profile

MODEL = Path(__file__).resolve().parents[2] / "models" / "inception_block.onnx"


def _err(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


def test_view_will_not_write_its_report_over_the_timeline(tmp_path, capsys):
    prof = tmp_path / "prof"
    assert cli.main(["run", str(MODEL), "--profile", str(prof)]) == 0
    capsys.readouterr()
    timeline = prof / "timeline.json"
    before = timeline.read_bytes()
    assert cli.main(["view", str(timeline), "-o", str(timeline)]) == 2
    assert "timeline.json" in _err(capsys) and timeline.read_bytes() == before


@pytest.mark.parametrize("flag", ["--output", "--plot"])
def test_sweep_will_not_write_over_a_model(tmp_path, capsys, flag):
    model = tmp_path / "m.onnx"
    shutil.copy(MODEL, model)
    before = model.read_bytes()
    assert cli.main(["sweep", str(model), flag, str(model)]) == 2
    assert "m.onnx" in _err(capsys) and model.read_bytes() == before


def test_a_profile_with_an_alias_bomb_is_refused(tmp_path):
    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [{', '.join(['*' + p] * 10)}]\n" for p, c in zip("abcdefgh", "bcdefghi"))
    path = tmp_path / "bomb.yaml"
    path.write_text(bomb)
    with pytest.raises(GraphExecError) as err:
        load_profile(str(path))
    assert "\n" not in str(err.value) and "bomb.yaml" in str(err.value) and "alias" in str(err.value)


def test_view_will_not_write_over_a_file_of_the_folder_it_reads(tmp_path, capsys):
    prof = tmp_path / "prof"
    assert cli.main(["run", str(MODEL), "--profile", str(prof)]) == 0
    capsys.readouterr()
    before = (prof / "timeline.json").read_bytes()
    assert cli.main(["view", str(prof), "-o", str(prof / "timeline.json")]) == 2
    assert "timeline.json" in _err(capsys) and (prof / "timeline.json").read_bytes() == before


@pytest.mark.parametrize("doc,why", [
    ({"traceEvents": [5]}, "traceEvents[0]: not an object"),
    ({"traceEvents": [{"ph": "X", "name": "k", "dur": 1}]}, "traceEvents[0].ts: Field required"),
    ({"traceEvents": [], "otherData": {"runs": [{"diagnosis": {}}]}},
     "otherData.runs[0].run: Field required"),
])
def test_a_malformed_timeline_is_one_line(tmp_path, capsys, doc, why):
    import json

    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    assert cli.main(["view", str(path), "-o", str(tmp_path / "r.html")]) == 2
    assert _err(capsys).strip() == f"graphexec: error: {path}: not a graphexec timeline: {why}"
