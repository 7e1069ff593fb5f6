"""A decode loop with the KV cache on the device, on two 2-layer GPT-2 decoders with past
key values: models/tiny_decoder.onnx (written with onnx.helper by models/make_decoder.py)
and models/gpt2_decoder.onnx (transformers' GPT2LMHeadModel, random weights, exported by
torch.onnx: models/export_decoder.py). Both have 2 heads of 8 and a vocabulary of 64."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

import graphexec as gx
from graphexec.engine.compiled import Compiled
from graphexec.profiling import env, msprof
from graphexec.runtime.device import Device

ROOT = Path(__file__).resolve().parents[2]
MODELS = [ROOT / "models" / "tiny_decoder.onnx", ROOT / "models" / "gpt2_decoder.onnx"]
MODEL = MODELS[0]
PROMPT, STEPS = [5, 17, 42, 8, 3], 16


@pytest.fixture(scope="module", params=MODELS, ids=lambda p: p.stem)
def model(request):
    return request.param


@pytest.fixture(scope="module")
def graph(model):
    return gx.load(model)


def _ort_loop(model: Path, prompt: list[int], steps: int) -> tuple[list[int], list[np.ndarray]]:
    """The same loop run from the host with onnxruntime: every past fed from host memory."""
    ort = pytest.importorskip("onnxruntime")
    s = ort.InferenceSession(str(model))
    names = [o.name for o in s.get_outputs()]
    cache = {f"past_key_values.{i}.{w}": np.zeros((1, 2, 0, 8), np.float32) for i in range(2) for w in ("key", "value")}
    ids, start, tokens, logits = list(prompt), 0, [], []
    for _ in range(steps + 1):
        feeds = {"input_ids": np.array([ids], np.int64),
                 "position_ids": np.arange(start, start + len(ids), dtype=np.int64)[None], **cache}
        out = dict(zip(names, s.run(None, feeds)))
        cache = {k: out[k.replace("past_key_values.", "present.")] for k in cache}
        logits.append(out["logits"])
        tokens.append(int(np.argmax(out["logits"][0, -1])))
        start += len(ids)
        ids = [tokens[-1]]
    return tokens, logits


def test_a_decode_loop_equals_onnxruntime_step_by_step(model, graph):
    run = gx.Session(graph).decode(PROMPT, STEPS)
    tokens, logits = _ort_loop(model, PROMPT, STEPS)
    assert len(set(tokens)) > 1   # tokens that differ: each step's input depends on the cache
    assert len(run.steps) == STEPS + 1 and run.tokens == tokens
    for ours, theirs in zip(run.steps, logits):
        np.testing.assert_allclose(ours.outputs["logits"], theirs, rtol=1e-4, atol=1e-5)
    assert isinstance(run.steps[-1].outputs["present.1.value"], gx.DeviceTensor)   # kept, never fetched
    doc = run.to_dict()
    assert doc["tokens"] == tokens and doc["per_token_us"] > 0 and len(doc["step_us"]) == STEPS + 1


def test_the_kv_cache_never_crosses_to_the_host(graph, monkeypatch):
    """Every copy a decode step's run makes (the plan's load, weights included, is not the
    run): the tokens in, the logits out, the cache only device to device."""
    per_step: list[list[tuple[str, int]]] = []
    inside = [False]
    real_copy, real_run = Device.memcpy_sync, Compiled.run

    def logged(self, nbytes, kind, copy, **kw):
        if inside[0]:
            per_step[-1].append((kind, nbytes))
        return real_copy(self, nbytes, kind, copy, **kw)

    def run(self, *args, **kw):
        per_step.append([])
        inside[0] = True
        try:
            return real_run(self, *args, **kw)
        finally:
            inside[0] = False

    monkeypatch.setattr(Device, "memcpy_sync", logged)
    monkeypatch.setattr(Compiled, "run", run)
    gx.Session(graph).decode(PROMPT, 4)
    assert len(per_step) == 5
    for k, step in enumerate(per_step[1:], start=1):   # every decode step after the prompt
        past = len(PROMPT) + k - 1
        kv = {1 * 2 * p * 8 * 4 for p in (past, past + 1)}   # one layer's key or value, in and out
        assert not [(kind, n) for kind, n in step if kind in ("h2d", "d2h") and n in kv]
        assert [(kind, n) for kind, n in step if kind != "d2d"] == [("h2d", 8), ("h2d", 8), ("d2h", 64 * 4)]
        d2d = sum(n for kind, n in step if kind == "d2d")
        assert d2d == 4 * (2 * past * 8 * 4) + 4 * (2 * (past + 1) * 8 * 4)   # the cache in, the new cache kept


def test_each_step_is_a_step_on_one_profiled_timeline(graph, tmp_path):
    with env.profile(tmp_path) as c:
        gx.Session(graph).decode(PROMPT, STEPS)
    doc = json.loads(next((c.path / msprof.OUTPUT).glob("msprof_*.json")).read_text())
    marks = [e for e in doc["traceEvents"] if e.get("cat") == "step"]
    assert [m["name"] for m in marks] == [f"ProfilerStep#{s}" for s in range(1, STEPS + 2)]
    # one after another on the device's clock; between them, what the host did on the device
    # besides the runs (each new cache length's plan loads its own small constants)
    assert all(a["ts"] + a["dur"] <= b["ts"] for a, b in zip(marks, marks[1:]))
    with open(next((c.path / msprof.OUTPUT).glob("op_summary_*.csv")), newline="") as f:
        rows = list(csv.DictReader(f))
    assert sorted({int(r["Step ID"]) for r in rows}) == list(range(1, STEPS + 2))


def test_a_captured_loop_is_faster_by_the_launch_costs_it_removes(graph):
    captured = gx.Session(graph, launch="graph").decode(PROMPT, STEPS)
    eager = gx.Session(graph, launch="host").decode(PROMPT, STEPS)
    assert captured.tokens == eager.tokens
    launch = load_launch_cost(graph)
    for c, e in zip(captured.steps[1:], eager.steps[1:]):
        saved = e.stats.makespan_us - c.stats.makespan_us
        assert 0 < saved <= e.stats.num_tasks * launch + 1e-6
    assert np.mean(captured.step_us[1:]) < np.mean(eager.step_us[1:])


def load_launch_cost(graph) -> float:
    return gx.Session(graph).profile.launch_cost_us


def test_decode_needs_a_decoder_with_its_cache():
    g = gx.load(ROOT / "models" / "inception_block.onnx")
    with pytest.raises(gx.GraphExecError, match="not a decoder with its KV cache"):
        gx.Session(g).decode([1], 2)


def test_the_command_line_decodes_a_users_model(model, graph, tmp_path, capsys):
    from graphexec.cli import main

    assert main(["decode", str(model), "--prompt", ",".join(map(str, PROMPT)), "--steps", "3", "--json",
                 "--profile", str(tmp_path)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["tokens"] == gx.Session(graph).decode(PROMPT, 3).tokens and doc["per_token_us"] > 0
    prof = Path(doc["profile"])
    assert prof.parent == tmp_path and next((prof / msprof.OUTPUT).glob("msprof_*.json")).is_file()
    assert main(["decode", str(MODEL), "--prompt", "1,x"]) == 2
    assert main(["decode", str(ROOT / "models" / "inception_block.onnx"), "--prompt", "1"]) == 2
    assert "not a decoder with its KV cache" in capsys.readouterr().err


def test_a_device_tensor_feeds_only_its_own_device_and_only_while_held(graph):
    a, b = gx.Session(graph), gx.Session(graph)
    feeds = {"input_ids": np.array([[1, 2]], np.int64), "position_ids": np.array([[0, 1]], np.int64)}
    empty = {f"past_key_values.{i}.{w}": np.zeros((1, 2, 0, 8), np.float32) for i in range(2) for w in ("key", "value")}
    kept = a.run({**feeds, **empty}, keep=["present.0.key"]).outputs["present.0.key"]
    assert kept.shape == (1, 2, 2, 8) and np.array_equal(kept.numpy(), a.run({**feeds, **empty}).outputs["present.0.key"])
    later = {"input_ids": np.array([[3]], np.int64), "position_ids": np.array([[2]], np.int64),
             **{k: np.zeros((1, 2, 2, 8), np.float32) for k in empty}, "past_key_values.0.key": kept}
    with pytest.raises(gx.FeedError, match="of another session"):
        b.run(later)
    kept.free()
    with pytest.raises(gx.FeedError, match="was freed"):
        a.run(later)
    with pytest.raises(gx.GraphExecError, match="keep: 'nope' is not an output"):
        a.run({**feeds, **empty}, keep=["nope"])


def test_decode_steps_follow_one_another_on_the_devices_clock(graph):
    run = gx.Session(graph).decode(PROMPT, 4)
    starts, gaps = run.starts_us, run.gaps_us
    assert starts[0] == 0.0 and all(b > a for a, b in zip(starts, starts[1:])) and len(gaps) == 4
    for k, gap in enumerate(gaps):   # the logits out, synchronize, the next token in and the launch
        assert starts[k + 1] - starts[k] >= run.steps[k].stats.host_time_us   # and the next plan's load
        assert 0 < gap < starts[k + 1] - starts[k]
    assert run.to_dict()["gaps_us"] == gaps


@pytest.mark.slow
def test_the_export_script_makes_the_committed_gpt2(tmp_path):
    """models/export_decoder.py, where torch and transformers are installed (never in CI's
    test extras: the committed file is what the other tests run), makes the same decoder."""
    for name in ("torch", "transformers", "onnxscript"):
        pytest.importorskip(name)
    import importlib.util

    spec = importlib.util.spec_from_file_location("export_decoder", ROOT / "models" / "export_decoder.py")
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    made = gx.Session(gx.load(script.export(tmp_path / "gpt2.onnx"))).decode(PROMPT, 4)
    assert made.tokens == gx.Session(gx.load(MODELS[1])).decode(PROMPT, 4).tokens
