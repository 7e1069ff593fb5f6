"""The command line's conventions, typed as a user types them: ``python -m graphexec``,
``--version``, shell completion, ``--json`` on every command in one vocabulary validated
against the published schema (schemas/cli.schema.json), ``--input`` from .npz, ONNX
TensorProto .pb files and onnxruntime_perf_test's folders, and a command's usage error
pointing at that command's help."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from onnx import numpy_helper

import graphexec as gx

jsonschema = pytest.importorskip("jsonschema")

ROOT = Path(__file__).resolve().parents[2]
MODEL = str(ROOT / "models" / "inception_block.onnx")
DECODER = str(ROOT / "models" / "tiny_decoder.onnx")
SCHEMA = json.loads((ROOT / "schemas" / "cli.schema.json").read_text())


def cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "graphexec", *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=300)


def valid(p: subprocess.CompletedProcess, command: str) -> dict:
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    jsonschema.Draft202012Validator(SCHEMA).validate(doc)
    assert doc["schema_version"] == SCHEMA["version"] and doc["command"] == command
    return doc


def test_python_m_version_and_help_anywhere(tmp_path):
    p = cli("--version", cwd=tmp_path)
    assert p.returncode == 0 and p.stdout.strip() == f"graphexec {gx.__version__}"
    assert "inspect" in cli("--help", cwd=tmp_path).stdout


def test_a_commands_usage_error_points_at_its_own_help():
    p = cli("run", MODEL, "--frobnicate")
    assert p.returncode == 2
    assert p.stderr == "graphexec run: error: unrecognized arguments: --frobnicate (see graphexec run --help)\n"


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")
def test_bash_completion_completes_commands_options_and_choices():
    script = cli("completion", "bash").stdout
    probe = script + '\nCOMP_WORDS=(graphexec ins); COMP_CWORD=1; _graphexec; echo "${COMPREPLY[@]}"' \
        '\nCOMP_WORDS=(graphexec run m.onnx --pol); COMP_CWORD=3; _graphexec; echo "${COMPREPLY[@]}"' \
        '\nCOMP_WORDS=(graphexec compare m.onnx --policy l); COMP_CWORD=4; _graphexec; echo "${COMPREPLY[@]}"'
    out = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, timeout=60).stdout.splitlines()
    assert out == ["inspect", "--policy", "list"]
    zsh = cli("completion", "zsh").stdout
    assert "bashcompinit" in zsh and "complete -o filenames -F _graphexec graphexec" in zsh


def test_every_json_output_is_valid_against_the_published_schema(tmp_path):
    run = valid(cli("run", MODEL, "--json"), "run")
    cmp = valid(cli("compare", MODEL, "--streams", "1,2", "--json"), "compare")
    assert cmp["rows"][0]["makespan_us"] == run["stats"]["makespan_us"]   # one key, one meaning
    assert "time_us" not in cmp["rows"][0] and "cube_util" not in cmp["rows"][0]
    plan = valid(cli("plan", MODEL, "--json"), "plan")
    assert plan["num_streams"] == 1 and plan["memory"]["peak_bytes"] == run["stats"]["peak_bytes"]
    sweep = valid(cli("sweep", MODEL, "--streams", "1", "--no-diagnosis", "--json"), "sweep")
    assert sweep["rows"][0]["streams"] == 1   # an int, as everywhere else
    valid(cli("validate", str(ROOT / "models" / "article_streams.yaml"), "--json"), "validate")
    valid(cli("inspect", DECODER, "--json"), "inspect")
    valid(cli("devices", "--json"), "devices")
    valid(cli("convert", MODEL, str(tmp_path / "m.yaml"), "--json"), "convert")
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nnodes: 3\n")
    p = cli("validate", str(bad), "--json")
    assert p.returncode == 2 and json.loads(p.stdout)["ok"] is False


def test_input_from_npz_pb_and_a_perf_test_folder(tmp_path):
    x = np.random.default_rng(0).standard_normal((1, 192, 28, 28)).astype(np.float32)
    ref = tmp_path / "ref.npz"
    np.savez(tmp_path / "in.npz", data=x)
    assert cli("run", MODEL, "--input", f"data={tmp_path / 'in.npz'}", "--save", str(ref)).returncode == 0
    want = np.load(ref)["out"]
    folder = tmp_path / "test_data_set_0"
    folder.mkdir()
    (folder / "input_0.pb").write_bytes(numpy_helper.from_array(x).SerializeToString())   # no name: by index
    named = tmp_path / "named.pb"
    named.write_bytes(numpy_helper.from_array(x, "data").SerializeToString())
    for given in (str(tmp_path / "in.npz"), f"data={named}", str(named), str(folder), str(tmp_path)):
        out = tmp_path / "out.npz"
        p = cli("run", MODEL, "--input", given, "--save", str(out))
        assert p.returncode == 0, (given, p.stderr)
        assert "input data: float32[1,192,28,28]" in p.stdout and "(made" not in p.stdout
        np.testing.assert_array_equal(np.load(out)["out"], want)
    wrong = tmp_path / "wrong.pb"
    wrong.write_bytes(numpy_helper.from_array(x, "image").SerializeToString())
    p = cli("run", MODEL, "--input", str(wrong))
    assert p.returncode == 2 and "named 'image', which is not an input of the graph; inputs are: data" in p.stderr
    (tmp_path / "junk.pb").write_bytes(b"\xff\xff\xff")
    p = cli("run", MODEL, "--input", f"data={tmp_path / 'junk.pb'}")
    assert p.returncode == 2 and "not an ONNX TensorProto" in p.stderr and p.stderr.count("\n") == 1
