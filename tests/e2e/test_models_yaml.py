"""The YAML examples in models/: each validates, runs against the onnx reference, and round-trips bit for bit;
the CLI's validate and convert."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from onnx.reference import ReferenceEvaluator

import graphexec as gx
from graphexec.frontend.convert import onnx_model, save, yaml_data
from graphexec.frontend.yaml import validate_yaml

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "models").glob("*.yaml"))


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "cli.py"), *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=300)


def run(graph: gx.Graph, streams: int = 1) -> dict[str, np.ndarray]:
    return gx.Session(graph, streams=streams).run(gx.default_feeds(graph)).outputs


def test_there_are_examples():
    assert {p.name for p in EXAMPLES} >= {"article_streams.yaml", "pipeline_overlap.yaml"}


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_validates_and_runs_like_the_onnx_reference(path):
    assert validate_yaml(path) == []
    graph = gx.load(path)
    got = run(graph, streams=graph.meta.get("options", {}).get("streams", 1))
    feeds = gx.default_feeds(graph)
    want = ReferenceEvaluator(onnx_model(graph)).run(None, feeds)
    for name, ref in zip(graph.outputs, want):
        np.testing.assert_allclose(got[name], ref, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_yaml_ir_onnx_round_trip_is_bit_identical(path, tmp_path):
    first = gx.load(path)
    want = run(first)
    save(first, tmp_path / "a.onnx")
    from_onnx = gx.load(tmp_path / "a.onnx")
    save(from_onnx, tmp_path / "b.yaml")
    from_yaml = gx.load(tmp_path / "b.yaml")
    for graph in (from_onnx, from_yaml):
        got = run(graph)
        assert all(got[k].tobytes() == want[k].tobytes() for k in want)
        assert graph.meta == first.meta
        assert [(n.name, n.meta) for n in graph.nodes] == [(n.name, n.meta) for n in first.nodes]
    (doc_a, arrays_a), (doc_b, arrays_b) = yaml_data(from_onnx, "w.npz"), yaml_data(from_yaml, "w.npz")
    assert doc_a == doc_b and {k: v.tobytes() for k, v in arrays_a.items()} == {k: v.tobytes() for k, v in
                                                                                arrays_b.items()}


def test_onnx_example_round_trips_through_yaml_by_cli(tmp_path):
    onnx_path = ROOT / "models" / "inception_block.onnx"
    p = cli("convert", str(onnx_path), str(tmp_path / "inc.yaml"))
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == f"wrote {tmp_path / 'inc.yaml'} and {tmp_path / 'inc.npz'}"
    assert cli("convert", str(tmp_path / "inc.yaml"), str(tmp_path / "inc.onnx")).returncode == 0
    want = run(gx.load(onnx_path))["out"]
    for path in ("inc.yaml", "inc.onnx"):
        assert run(gx.load(tmp_path / path))["out"].tobytes() == want.tobytes()


def test_article_scenario_overlaps_and_waits_for_the_event():
    graph = gx.load(ROOT / "models" / "article_streams.yaml")
    assert [s["name"] for s in graph.meta["schedule"]["streams"]] == ["stream1", "stream2"]
    result = gx.Session(graph, streams=2).run(gx.default_feeds(graph))
    spans = {e["args"]["node"]: (e["tid"], e["ts"], e["ts"] + e["dur"])
             for e in result.trace["traceEvents"] if e.get("cat") == "kernel"}
    pre = [v for k, v in spans.items() if k.startswith("pre_")]
    main = [v for k, v in spans.items() if k.startswith("main_")]
    assert len({t for t, _, _ in pre}) == 1 and {t for t, _, _ in pre} != {t for t, _, _ in main}  # two streams
    assert any(a < d and c < b for _, a, b in pre for _, c, d in main)          # they overlap in time
    assert spans["post_proj"][1] >= spans["pre_pool"][2]                       # postprocessing after event1


def test_cli_validate_ok_and_every_problem(tmp_path):
    path = ROOT / "models" / "article_streams.yaml"
    p = cli("validate", str(path))
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == f"{path}: ok, 10 nodes, 2 inputs, 1 outputs, a schedule on 2 streams"
    bad = tmp_path / "bad.yaml"
    bad.write_text(path.read_text().replace("{wait: event1}, ", "").replace("op: MatMul", "op: Matmul", 1))
    p = cli("validate", str(bad))
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert p.stderr.splitlines() == [
        f"{bad}:30:22: node 'main_fc1': unknown op 'Matmul'; closest known: MatMul, Mul",
        f"{bad}:42:46: node 'post_proj' on stream 'stream2' reads 'pre_feat' from node 'pre_pool' on stream "
        "'stream1' with no event between them: record an event on 'stream1' after 'pre_pool' and wait for it on "
        "'stream2' before 'post_proj'",
    ]


def test_cli_errors_are_one_line(tmp_path):
    p = cli("convert", str(ROOT / "models" / "article_streams.yaml"), str(tmp_path / "x.txt"))
    assert (p.returncode, p.stderr.strip()) == (2, f"graphexec: error: {tmp_path / 'x.txt'}: can write .yaml, .yml "
                                                   "or .onnx, not .txt")
    p = cli("validate", str(tmp_path / "none.yaml"))
    assert (p.returncode, p.stderr.strip()) == (2, f"graphexec: error: {tmp_path / 'none.yaml'}: no such file")
    p = cli("run", str(ROOT / "models" / "article_streams.yaml"), "--kernels", str(tmp_path / "k.py"))
    assert (p.returncode, p.stderr.strip()) == (2, f"graphexec: error: --kernels {tmp_path / 'k.py'}: no such file")


def test_cli_runs_a_yaml_graph_with_a_custom_kernel(tmp_path):
    (tmp_path / "k.py").write_text("import numpy as np\nimport graphexec as gx\n\n"
                                   "@gx.kernel('CliDouble', shape='same')\ndef double(x):\n    return x * 2\n")
    (tmp_path / "g.yaml").write_text("name: g\nopset: 17\ninputs: [x]\noutputs: [y]\n"
                                     "tensors: {x: {dtype: float32, shape: [2, 2]}}\n"
                                     "nodes: [{op: CliDouble, inputs: [x], outputs: [y]}]\n")
    p = cli("run", str(tmp_path / "g.yaml"), "--kernels", str(tmp_path / "k.py"), "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["outputs"]["y"]["head"] == [0.0, 0.5, 1.0, 1.5]  # (arange(4) / 4) * 2
    p = cli("validate", str(tmp_path / "g.yaml"))
    assert p.returncode == 2
    assert p.stderr.strip() == (f"{tmp_path / 'g.yaml'}:6:10: node 'CliDouble_0': unknown op 'CliDouble'; "
                                "no ONNX op or registered kernel has a similar name")
