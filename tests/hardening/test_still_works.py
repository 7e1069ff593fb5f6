"""The other side of issue 21's refusals: what a careful model does still loads and runs.

Aliases within the bound, nesting within the limit, files and device profiles inside
the model's folder (a symlink that stays inside too), options and schedules in ONNX
metadata that YAML accepts, and a budget named by GRAPHEXEC_HOST_BUDGET.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from onnx import helper

import graphexec as gx
from graphexec._limits import host_budget, over_budget
from graphexec.errors import GraphExecError
from graphexec.frontend.convert import save
from graphexec.frontend.provenance import files_read
from graphexec.frontend.yaml_source import ALIAS_EXTRA_MAX, MAX_NESTING, parse
from hardening import bad_inputs as B
from hardening.test_corpus import run_cli

X = {"x": np.arange(6, dtype=np.float32).reshape(2, 3) - 2}


def test_aliases_within_the_bound_load():
    text = B.RELU_YAML.replace("shape: [2, 3]", "shape: &s [2, 3]") + "extra: &e [1, 2]\n"
    src, problems = parse(text + "again: [*e, *e, *s]\n", "g.yaml")
    assert problems == [] and src.data["again"] == [[1, 2], [1, 2], [2, 3]]


def test_aliases_up_to_the_bound_expand():
    """Aliases that add ALIAS_EXTRA_MAX nodes or fewer are fine; one more is refused."""
    base = "a: &a [" + ", ".join(["0"] * 999) + "]\n"   # 1,000 nodes with the list itself
    fits = ALIAS_EXTRA_MAX // 1000
    assert parse(base + "b: [" + ", ".join(["*a"] * fits) + "]\n", "g.yaml")[1] == []
    over = parse(base + "b: [" + ", ".join(["*a"] * (fits + 3)) + "]\n", "g.yaml")[1]
    assert len(over) == 1 and "an alias bomb" in over[0].message


def test_nesting_up_to_the_limit_parses():
    depth = MAX_NESTING - 1  # the top mapping is one level
    assert parse("a: " + "[" * depth + "]" * depth + "\n", "g.yaml")[1] == []
    assert "nest more than" in parse("a: " + "[" * (depth + 1) + "]" * (depth + 1) + "\n", "g.yaml")[1][0].message


def test_files_inside_the_folder_load_through_a_symlink_that_stays_inside(tmp_path):
    (tmp_path / "weights").mkdir()
    np.save(tmp_path / "weights" / "w.npy", np.full((2, 3), 0.5, np.float32))
    (tmp_path / "w.npy").symlink_to(tmp_path / "weights" / "w.npy")
    text = B.yaml_graph("  - {name: act, op: Add, inputs: [x, w], outputs: [y]}\n",
                        {"shape: [2, 3]}\n": "shape: [2, 3]}\n  w: {dtype: float32, shape: [2, 3], file: w.npy}\n"})
    graph = gx.load(B.write(tmp_path, "g.yaml", text))
    np.testing.assert_array_equal(gx.Session(graph).run(X).outputs["y"], X["x"] + 0.5)
    assert files_read(graph) == [str(tmp_path / "weights" / "w.npy")] and "files" not in graph.meta


def test_device_profile_beside_the_model_is_used_and_stays_relative(tmp_path):
    (tmp_path / "m").mkdir()
    B.device_profile(tmp_path / "m", name="mine", hbm_capacity_bytes=1 << 30)
    text = B.RELU_YAML + "options: {device: device.yaml}\n"
    graph = gx.load(B.write(tmp_path / "m", "g.yaml", text))
    assert gx.Session(graph).profile.hbm_capacity_bytes == 1 << 30
    (tmp_path / "out").mkdir()
    save(graph, tmp_path / "out" / "g.onnx")  # written relative to its new folder, so loading refuses it
    with pytest.raises(gx.ModelLoadError, match=r"device profile '../m/device.yaml' is outside the model's folder"):
        gx.load(tmp_path / "out" / "g.onnx")
    save(graph, tmp_path / "m" / "g.onnx")  # beside the profile: loads and uses it
    assert gx.Session(gx.load(tmp_path / "m" / "g.onnx")).profile.hbm_capacity_bytes == 1 << 30


def test_onnx_metadata_yaml_accepts_loads_the_same(tmp_path):
    m = B.model([helper.make_node("Relu", ["x"], ["t"], name="a"), helper.make_node("Neg", ["t"], ["y"], name="b")])
    schedule = {"streams": [{"name": "s0", "priority": 1, "tasks": [{"run": "a"}, {"record": "e"}]},
                            {"name": "s1", "priority": None, "tasks": [{"wait": "e"}, {"run": "b"}]}],
                "synchronize": ["s1"]}
    m.metadata_props.add(key="graphexec.schedule", value=json.dumps(schedule))
    m.metadata_props.add(key="graphexec.options", value=json.dumps({"streams": "auto", "fold": False}))
    m.graph.node[1].metadata_props.add(key="graphexec.priority", value="3")
    graph = gx.load(B.write(tmp_path, "m.onnx", m))
    assert graph.meta["schedule"] == schedule and graph.meta["options"] == {"streams": "auto", "fold": False}
    assert graph.nodes[1].meta == {"priority": 3}
    np.testing.assert_array_equal(gx.Session(graph).run(X).outputs["y"], -np.maximum(X["x"], 0))


def test_a_missing_event_in_onnx_metadata_is_refused_as_in_yaml(tmp_path):
    m = B.model([helper.make_node("Relu", ["x"], ["t"], name="a"), helper.make_node("Neg", ["t"], ["y"], name="b")])
    m.metadata_props.add(key="graphexec.schedule", value=json.dumps(
        {"streams": [{"name": "s0", "tasks": [{"run": "a"}]}, {"name": "s1", "tasks": [{"run": "b"}]}]}))
    with pytest.raises(gx.ModelLoadError, match=r"^.*m.onnx: metadata graphexec.schedule: node 'b' on stream 's1' "
                                                r"reads 't' from node 'a' on stream 's0' with no event between them"):
        gx.load(B.write(tmp_path, "m.onnx", m))


@pytest.mark.parametrize("text,message", [("abc", "GRAPHEXEC_HOST_BUDGET='abc': must be a number of bytes"),
                                          ("0", "GRAPHEXEC_HOST_BUDGET='0': must be at least 1 byte")])
def test_a_bad_budget_variable_is_one_line(text, message, monkeypatch):
    monkeypatch.setenv("GRAPHEXEC_HOST_BUDGET", text)
    with pytest.raises(GraphExecError, match=f"^{message}$"):
        host_budget()


def test_the_default_budget_is_half_the_machine(monkeypatch):
    import os

    monkeypatch.delenv("GRAPHEXEC_HOST_BUDGET")
    budget, source = host_budget()
    assert budget == os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 2
    assert source == "half of this host's memory; GRAPHEXEC_HOST_BUDGET sets it"
    assert over_budget(budget) is None and over_budget(budget + 1) is not None


def test_outputs_that_differ_are_written(tmp_path, capsys):
    """Distinct outputs beside the model and its input still work (the checks compare files, not folders)."""
    model = B.write(tmp_path, "relu.onnx", B.relu_model())
    np.save(tmp_path / "x.npy", X["x"])
    rc, _, err = run_cli(["run", model, "--input", f"x={tmp_path / 'x.npy'}", "--save", tmp_path / "o.npz",
                          "--trace", tmp_path / "t.json", "--profile", tmp_path / "p"], capsys)
    assert rc == 0, err
    np.testing.assert_array_equal(np.load(tmp_path / "o.npz")["y"], np.maximum(X["x"], 0))


def test_the_bounded_loader_serves_any_yaml_file():
    """BoundedLoader is a SafeLoader for yaml.load (device and system files can use it too)."""
    import yaml

    from graphexec._limits import BoundedLoader
    from hardening.round_two import _bomb

    assert yaml.load("a: &x [1, 2]\nb: *x\n", Loader=BoundedLoader) == {"a": [1, 2], "b": [1, 2]}
    for text in (_bomb(), "a: &x [*x]\n", "a: " + "[" * 500 + "]" * 500):
        with pytest.raises(yaml.MarkedYAMLError):
            yaml.load(text, Loader=BoundedLoader)


@pytest.mark.parametrize("kw,message", [({"priority": 99}, "priority: Input should be less than or equal to 7"),
                                        ({"priority": True}, "priority: Input should be a valid integer"),
                                        ({"stream_label": 3}, "stream_label: Input should be a valid string")])
def test_the_builder_checks_annotations_as_yaml_does(kw, message):
    b = gx.GraphBuilder("g")
    x = b.input("x", np.float32, [2, 3])
    with pytest.raises(gx.GraphError, match=f"^builder 'g': node relu: {message}$"):
        b.op("Relu", x, **kw)
    assert b.op("Relu", x, priority=7, stream_label="s").name  # the bounds themselves are fine


@pytest.mark.parametrize("kw,message", [({"fold": "no"}, "fold: Input should be a valid boolean"),
                                        ({"policy": 5}, "policy: Input should be a valid string"),
                                        ({"streams": True}, "streams: must be an int >= 1 or 'auto'")])
def test_session_options_have_the_same_check(kw, message):
    """The hook Session's keywords can go through: the YAML options model, strict."""
    from graphexec.frontend.options import check_session_options

    with pytest.raises(GraphExecError, match=f"^{message}$"):
        check_session_options(**kw)
    check_session_options(streams="auto", fold=False, memory_reuse=True, policy="ge", device=None)
