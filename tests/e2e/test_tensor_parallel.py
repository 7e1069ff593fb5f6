"""Tensor parallelism (issue 16): Megatron-style MatMul pairs and attention heads split over
2 and 4 cards are allclose to one device with each card holding 1/N of the weights;
compute-heavy MLPs (and two towers) are faster on 2 cards than on one, and a tower hides
the other's all-reduce; a split the cost model says does not pay, or the shapes do not
allow, runs replicated and says why; a real exported encoder (MiniLM) splits by heads."""

from __future__ import annotations

import re
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import graphexec as gx
from graphexec.cluster import tensor as parallel_tensor


def _model(nodes, inits, batch: int, d: int, out: int | None = None) -> gx.Graph:
    g = helper.make_graph(nodes, "tp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, d])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, out or d])],
                          [numpy_helper.from_array(v, k) for k, v in inits.items()])
    return gx.load(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))


def _w(rng, *shape) -> np.ndarray:
    return (rng.standard_normal(shape) / np.sqrt(shape[0])).astype(np.float32)


def mlp(batch=64, d=1024, hid=4096, prefix="", x="x", y="y"):
    rng = np.random.default_rng(len(prefix))
    p = prefix
    nodes = [helper.make_node("MatMul", [x, p + "w1"], [p + "h0"], name=p + "mm1"),
             helper.make_node("Relu", [p + "h0"], [p + "h1"], name=p + "relu"),
             helper.make_node("MatMul", [p + "h1", p + "w2"], [y], name=p + "mm2")]
    return nodes, {p + "w1": _w(rng, d, hid), p + "w2": _w(rng, hid, d)}


def block(batch=64, d=1024, hid=4096):
    """MatMul + bias + Gelu (as Erf) + MatMul + bias, with a residual Add."""
    rng = np.random.default_rng(1)
    inits = {"w1": _w(rng, d, hid), "b1": rng.standard_normal(hid).astype(np.float32), "w2": _w(rng, hid, d),
             "b2": rng.standard_normal(d).astype(np.float32), "s2": np.array(np.sqrt(2), np.float32),
             "one": np.array(1, np.float32), "half": np.array(0.5, np.float32)}
    mk = helper.make_node
    nodes = [mk("MatMul", ["x", "w1"], ["h0"], name="mm1"), mk("Add", ["h0", "b1"], ["h1"], name="ab1"),
             mk("Div", ["h1", "s2"], ["g0"], name="g0"), mk("Erf", ["g0"], ["g1"], name="g1"),
             mk("Add", ["g1", "one"], ["g2"], name="g2"), mk("Mul", ["h1", "g2"], ["g3"], name="g3"),
             mk("Mul", ["g3", "half"], ["g4"], name="g4"), mk("MatMul", ["g4", "w2"], ["o0"], name="mm2"),
             mk("Add", ["o0", "b2"], ["o1"], name="ab2"), mk("Add", ["o1", "x"], ["y"], name="res")]
    return _model(nodes, inits, batch, d)


def _feeds(graph: gx.Graph) -> dict[str, np.ndarray]:
    shape = graph.values["x"].type.shape
    return {"x": np.random.default_rng(2).standard_normal(shape).astype(np.float32)}


MODELS = {"mlp": lambda: _model(*mlp(), 64, 1024), "block": block}


@pytest.mark.parametrize("devices", [2, 4])
@pytest.mark.parametrize("name", list(MODELS))
def test_tensor_parallel_is_allclose_with_sharded_weights(name, devices, no_cost_check):
    graph = MODELS[name]()
    feeds = _feeds(graph)
    one = gx.Session(graph).run(feeds)
    result = gx.Session(graph, devices=devices, parallel="tensor").run(feeds)
    np.testing.assert_allclose(result.outputs["y"], one.outputs["y"], rtol=1e-4, atol=1e-4)
    s = result.stats
    splits = s.extra["tensor_splits"]
    assert [x["nodes"] for x in splits["split"]] == [["mm1", "mm2"]] and splits["replicated"] == []
    assert [c["device"] for c in s.per_device] == list(range(devices))
    full = one.stats.weight_bytes
    for c in s.per_device:
        assert c["weight_bytes"] == pytest.approx(full / devices, rel=0.05)
    assert s.comm_bytes > 0 and s.comm_us > 0 and 0.0 <= s.comm_hidden <= 1.0


def _speedup(graph: gx.Graph, feeds: dict) -> tuple[float, gx.Result, gx.Result]:
    """One card against two, both through the same launches (host copies included)."""
    c = gx.compare(graph, devices=[1, 2], parallel="tensor", feeds=feeds)
    one, two = c.results
    np.testing.assert_allclose(two.outputs["y"], one.outputs["y"], rtol=1e-4, atol=1e-3)
    return c.rows[1].speedup, one, two


def test_compute_heavy_mlp_is_faster_on_two_cards():
    graph = _model(*mlp(batch=64, d=512, hid=65536), 64, 512)
    speedup, _, two = _speedup(graph, _feeds(graph))
    assert two.stats.extra["tensor_splits"]["split"] and speedup >= 1.4


def test_independent_tower_hides_the_all_reduce():
    a, wa = mlp(batch=64, d=512, hid=32768, prefix="a_", y="ya")
    b, wb = mlp(batch=64, d=512, hid=32768, prefix="b_", y="yb")
    graph = _model(a + b + [helper.make_node("Add", ["ya", "yb"], ["y"], name="sum")], {**wa, **wb}, 64, 512)
    speedup, _, two = _speedup(graph, _feeds(graph))
    assert len(two.stats.extra["tensor_splits"]["split"]) == 2
    assert speedup >= 1.4 and two.stats.comm_hidden >= 0.2


def test_no_splittable_pair_runs_replicated_and_says_so():
    rng = np.random.default_rng(3)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
             helper.make_node("Softmax", ["h"], ["y"], name="sm", axis=-1)]
    graph = _model(nodes, {"w": _w(rng, 256, 256)}, 8, 256)
    feeds = _feeds(graph)
    one = gx.Session(graph).run(feeds)
    r = gx.Session(graph, devices=2, parallel="tensor").run(feeds)
    np.testing.assert_allclose(r.outputs["y"], one.outputs["y"], rtol=1e-5)
    splits = r.stats.extra["tensor_splits"]
    assert splits["split"] == [] and splits["replicated"][0]["node"] == "mm"
    assert "reads the split columns" in splits["replicated"][0]["reason"]
    assert r.stats.per_device[1]["weight_bytes"] == one.stats.weight_bytes



@pytest.mark.parametrize("devices", [2, 4])
def test_conv_splits_by_output_channels_with_an_all_gather(devices):
    """A heavy Conv splits; a light one stays whole (its all-gather would cost more than
    the compute it spreads); one whose channels do not divide stays whole."""
    rng = np.random.default_rng(4)
    mk = helper.make_node
    # heavy enough to split in float16 (force_fp16 halves its time, not the all-gather's)
    inits = {"wa": _w(rng, 512, 4096, 3, 3), "ba": rng.standard_normal(512).astype(np.float32),
             "wb": _w(rng, 256, 512, 1, 1), "wc": _w(rng, 5, 512, 1, 1)}
    nodes = [mk("Conv", ["x", "wa", "ba"], ["a"], name="ca", pads=[1, 1, 1, 1]), mk("Relu", ["a"], ["r"], name="r"),
             mk("Conv", ["r", "wb"], ["b"], name="cb"), mk("Conv", ["r", "wc"], ["c"], name="cc"),
             mk("Concat", ["b", "c"], ["y"], name="cat", axis=1)]
    g = helper.make_graph(nodes, "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4096, 7, 7])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 261, 7, 7])],
                          [numpy_helper.from_array(v, k) for k, v in inits.items()])
    graph = gx.load(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
    feeds = _feeds(graph)
    one = gx.Session(graph).run(feeds)
    result = gx.Session(graph, devices=devices, parallel="tensor").run(feeds)
    np.testing.assert_allclose(result.outputs["y"], one.outputs["y"], rtol=1e-4, atol=1e-4)
    splits = result.stats.extra["tensor_splits"]
    assert [(x["nodes"], x["collective"]) for x in splits["split"]] == [(["ca"], "all_gather")]
    why = {x["node"]: x["reason"] for x in splits["replicated"]}
    assert re.fullmatch(r"it would save [\d.]+ us of compute for [\d.]+ us of all_gather", why["cb"])
    assert why["cc"] == f"its 5 output channels do not split over {devices} cards"
    sharded = (inits["wa"].nbytes + inits["ba"].nbytes) / devices + inits["wb"].nbytes + inits["wc"].nbytes
    assert result.stats.per_device[1]["weight_bytes"] == pytest.approx(sharded, rel=0.05)   # plus alignment


def attention_block(batch=2, seq=16, d=256, heads=8, hid=1024):
    """A BERT layer as torch exports it: Q/K/V MatMul + bias, Reshape to heads, Transpose,
    Q.K^T / sqrt(dh) + mask, Softmax, .V, Transpose + Reshape back, output MatMul + bias,
    residual, LayerNormalization, then the Gelu MLP."""
    rng = np.random.default_rng(5)
    dh, mk = d // heads, helper.make_node
    inits = {f"w{k}": _w(rng, d, d) for k in "qkvo"} | {f"b{k}": _w(rng, d) for k in "qkvo"}
    inits |= {"heads_shape": np.array([batch, seq, heads, dh], np.int64), "flat": np.array([0, 0, d], np.int64),
              "scale": np.array(np.sqrt(dh), np.float32), "gamma": np.ones(d, np.float32),
              "beta": np.zeros(d, np.float32), "w1": _w(rng, d, hid), "b1": _w(rng, hid), "w2": _w(rng, hid, d),
              "big": np.array(-1e4, np.float32), "one": np.array(1.0, np.float32)}
    nodes = [mk("Cast", ["mask"], ["maskf"], to=TensorProto.FLOAT), mk("Sub", ["one", "maskf"], ["inv"]),
             mk("Mul", ["inv", "big"], ["neg"]), mk("Unsqueeze", ["neg", "axes12"], ["m4"])]
    inits["axes12"] = np.array([1, 2], np.int64)
    for k in "qkv":
        nodes += [mk("MatMul", ["x", f"w{k}"], [f"{k}0"], name=f"{k}_proj"), mk("Add", [f"{k}0", f"b{k}"], [f"{k}1"]),
                  mk("Reshape", [f"{k}1", "heads_shape"], [f"{k}2"])]
    nodes += [mk("Transpose", ["q2"], ["qt"], perm=[0, 2, 1, 3]), mk("Transpose", ["k2"], ["kt"], perm=[0, 2, 3, 1]),
              mk("Transpose", ["v2"], ["vt"], perm=[0, 2, 1, 3]), mk("MatMul", ["qt", "kt"], ["s0"], name="scores"),
              mk("Div", ["s0", "scale"], ["s1"]), mk("Add", ["s1", "m4"], ["s2"]),
              mk("Softmax", ["s2"], ["p"], axis=-1), mk("MatMul", ["p", "vt"], ["ctx"], name="context"),
              mk("Transpose", ["ctx"], ["ctx_t"], perm=[0, 2, 1, 3]), mk("Reshape", ["ctx_t", "flat"], ["ctx2"]),
              mk("MatMul", ["ctx2", "wo"], ["o0"], name="o_proj"), mk("Add", ["o0", "bo"], ["o1"]),
              mk("Add", ["o1", "x"], ["res"]), mk("LayerNormalization", ["res", "gamma", "beta"], ["h"], axis=-1),
              mk("MatMul", ["h", "w1"], ["f0"], name="ffn_in"), mk("Add", ["f0", "b1"], ["f1"]),
              mk("Relu", ["f1"], ["f2"]), mk("MatMul", ["f2", "w2"], ["f3"], name="ffn_out"), mk("Add", ["f3", "h"], ["y"])]
    g = helper.make_graph(nodes, "bert_layer",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, seq, d]),
                           helper.make_tensor_value_info("mask", TensorProto.INT64, [batch, seq])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, seq, d])],
                          [numpy_helper.from_array(v, k) for k, v in inits.items()])
    return gx.load(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))


def _bert_feeds(graph: gx.Graph) -> dict[str, np.ndarray]:
    batch, seq, d = graph.values["x"].type.shape
    rng = np.random.default_rng(6)
    mask = np.ones((batch, seq), np.int64)
    mask[:, seq - 3:] = 0
    return {"x": rng.standard_normal((batch, seq, d)).astype(np.float32), "mask": mask}


@pytest.fixture
def no_cost_check(monkeypatch):
    """Split wherever the shapes allow (the cost check has its own tests)."""
    monkeypatch.setattr(parallel_tensor, "_worth", lambda *args: None)


@pytest.mark.parametrize("devices", [2, 4])
def test_attention_splits_by_heads(devices, no_cost_check):
    graph = attention_block()
    feeds = _bert_feeds(graph)
    one = gx.Session(graph).run(feeds)
    result = gx.Session(graph, devices=devices, parallel="tensor", check_hazards=True).run(feeds)
    np.testing.assert_allclose(result.outputs["y"], one.outputs["y"], rtol=1e-4, atol=1e-4)
    assert result.stats.extra["hazards"] == []   # every read of a collective's result waits for it
    splits = result.stats.extra["tensor_splits"]
    assert [(x["nodes"], x["kind"], x.get("heads")) for x in splits["split"]] == [
        (["q_proj", "k_proj", "v_proj", "o_proj"], "attention heads", 8),
        (["ffn_in", "ffn_out"], "column+row parallel", None)]
    per_card = {"q_proj", "k_proj", "v_proj", "o_proj", "ffn_in", "ffn_out"}
    assert result.stats.per_device[1]["weight_bytes"] < one.stats.weight_bytes / devices * 1.1 + 4096 * len(per_card)


def test_heads_that_do_not_divide_stay_whole(no_cost_check):
    graph = attention_block(heads=6, d=192)
    result = gx.Session(graph, devices=4, parallel="tensor").run(_bert_feeds(graph))
    np.testing.assert_allclose(result.outputs["y"], gx.Session(graph).run(_bert_feeds(graph)).outputs["y"],
                               rtol=1e-4, atol=1e-4)
    splits = result.stats.extra["tensor_splits"]
    assert [x["nodes"] for x in splits["split"]] == [["ffn_in", "ffn_out"]]
    why = {x["node"]: x["reason"] for x in splits["replicated"]}
    assert why["q_proj"] == "with o_proj: 'ctx_t' is 6 along the split axis 2, which 4 cards do not divide"


def test_a_split_that_does_not_pay_stays_whole():
    graph = attention_block(batch=1, seq=4, d=64, heads=4, hid=128)   # each all-reduce costs more than it saves
    result = gx.Session(graph, devices=2, parallel="tensor").run(_bert_feeds(graph))
    splits = result.stats.extra["tensor_splits"]
    assert splits["split"] == []
    assert re.fullmatch(r"with o_proj: it would save [\d.]+ us of compute for [\d.]+ us of all_reduce",
                        {x["node"]: x["reason"] for x in splits["replicated"]}["q_proj"])


@pytest.mark.parametrize("devices", [2, 4])
def test_real_encoder_splits_by_heads(devices, no_cost_check):
    """MiniLM-L3 as sentence-transformers exported it (12 heads, 3 layers): every layer's
    attention splits by heads and its MLP column+row, allclose to one device."""
    graph, feeds = _minilm()
    one = gx.Session(graph).run(feeds)
    result = gx.Session(graph, devices=devices, parallel="tensor").run(feeds)
    for k, v in one.outputs.items():
        np.testing.assert_allclose(result.outputs[k], v, rtol=1e-4, atol=1e-4)
    kinds = [x["kind"] for x in result.stats.extra["tensor_splits"]["split"]]
    assert kinds == ["attention heads", "column+row parallel"] * 3


def _minilm() -> tuple[gx.Graph, dict]:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import real_models as rm

    entry = next(e for e in rm.MANIFEST if e.name == "minilm_l3_paraphrase")
    path = rm.fetch(entry)
    if path is None:
        pytest.skip(f"minilm_l3_paraphrase: {rm.fetch_reason(entry)}")
    shapes = {name: (4, 16) for name, _, _ in rm.model_inputs(path)}
    return gx.load(str(path)), rm.make_feeds(replace(entry, shapes=shapes), path)


def test_light_model_with_a_declared_batch_runs_and_keeps_whole_what_does_not_pay():
    """SqueezeNet (declared batch 1) at batch 8: the batch is freed as in the other modes;
    every Conv's all-gather would cost more than it saves, so all stay whole, and the
    outputs are one device's, bit for bit."""
    import onnx

    graph = gx.load(str(Path(onnx.__file__).parent / "backend/test/data/light/light_squeezenet.onnx"))
    x = graph.inputs[0]
    feeds = {x: np.random.default_rng(0).standard_normal((8, 3, 224, 224)).astype(np.float32)}
    c = gx.compare(graph, devices=[1, 2], parallel="tensor", feeds=feeds)
    assert c.identical and c.rows[1].speedup == pytest.approx(1.0, abs=0.01)
    replicated = c.results[1].stats.extra["tensor_splits"]["replicated"]
    assert replicated and all(re.match(r"it would save .* of all_gather|its \d+ output channels", r["reason"])
                              for r in replicated)


def test_too_big_for_one_card_runs_sharded(no_cost_check):
    """An MLP whose weights (32 MiB) outgrow a 24 MiB card runs on 2 cards, each holding half."""
    from graphexec.errors import OutOfMemoryError
    from graphexec.runtime.profiles import load_profile

    graph = _model(*mlp(batch=8, d=1024, hid=4096), 8, 1024)
    feeds = _feeds(graph)
    small = load_profile("ascend910").model_copy(update={"hbm_capacity_bytes": 24 << 20})
    with pytest.raises(OutOfMemoryError):
        gx.Session(graph, device=small).run(feeds)
    result = gx.Session(graph, device=small, devices=2, parallel="tensor").run(feeds)
    np.testing.assert_allclose(result.outputs["y"], gx.Session(graph).run(feeds).outputs["y"], rtol=1e-4, atol=1e-4)
    assert all(c["weight_bytes"] <= 17 << 20 for c in result.stats.per_device)


def test_each_input_crosses_to_a_card_once():
    """Both towers read ``x``: it is uploaded once per card, the second segment copies it on the card."""
    a, wa = mlp(batch=64, d=512, hid=32768, prefix="a_", y="ya")
    b, wb = mlp(batch=64, d=512, hid=32768, prefix="b_", y="yb")
    graph = _model(a + b + [helper.make_node("Add", ["ya", "yb"], ["y"], name="sum")], {**wa, **wb}, 64, 512)
    feeds = _feeds(graph)
    r = gx.Session(graph, devices=2, parallel="tensor").run(feeds)
    np.testing.assert_allclose(r.outputs["y"], gx.Session(graph).run(feeds).outputs["y"], rtol=1e-4, atol=1e-4)
    uploads = [(e["pid"], e["name"]) for e in r.trace["traceEvents"] if e.get("cat") == "memcpy" and "h2d" in e["name"]]
    assert sorted(uploads) == [(0, "memcpy h2d x"), (1, "memcpy h2d x")]


def test_tensor_parallel_replays_its_collectives(no_cost_check, monkeypatch):
    """A signature's run is simulated once (``cluster/tape.py``): the all-reduce's math (once
    every rank arrived) and each rank's landing are tasks of the tape, and a replay gives
    what a simulated run gives, by bytes, stats and trace."""
    from dataclasses import replace

    from graphexec.cluster import tape
    from graphexec.cluster.tape import CardsTape

    graph = block(batch=8, d=64, hid=256)
    rng = np.random.default_rng(4)
    feeds = [{"x": rng.standard_normal((8, 64)).astype(np.float32)} for _ in range(3)]

    def runs():
        session = gx.Session(graph, devices=2, parallel="tensor")
        return [session.run(f) for f in feeds], session

    replays = []
    replay = CardsTape.replay
    monkeypatch.setattr(CardsTape, "replay", lambda self, fns: (replays.append(len(fns)), replay(self, fns))[1])
    taped, session = runs()
    assert len(session.multi._tapes) == 1 and taped[0].stats.extra["tensor_splits"]["split"]
    assert len(replays) == 2   # the second and third runs
    monkeypatch.setattr(tape, "REPLAY", False)   # every run simulates
    simulated, _ = runs()
    for a, b in zip(taped, simulated):
        assert a.outputs["y"].tobytes() == b.outputs["y"].tobytes()
        assert repr(replace(a.stats, compile_s=0.0, host_time_us=0.0)) == \
            repr(replace(b.stats, compile_s=0.0, host_time_us=0.0))
        assert a.trace == b.trace
