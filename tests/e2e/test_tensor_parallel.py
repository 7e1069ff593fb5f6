"""Tensor parallelism (issue 16): Megatron-style MatMul pairs split over 2 and 4 cards are
allclose to one device with each card holding 1/N of the weights; a compute-heavy MLP
is faster on 2 cards; an independent tower hides an all-reduce; no splittable pair runs
replicated and says so."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import graphexec as gx


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
def test_tensor_parallel_is_allclose_with_sharded_weights(name, devices):
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


def test_compute_heavy_mlp_is_faster_on_two_cards():
    graph = _model(*mlp(batch=64, d=512, hid=65536), 64, 512)
    feeds = _feeds(graph)
    one = gx.Session(graph).run(feeds)
    two = gx.Session(graph, devices=2, parallel="tensor").run(feeds)
    np.testing.assert_allclose(two.outputs["y"], one.outputs["y"], rtol=1e-4, atol=1e-3)
    assert one.stats.makespan_us / two.stats.makespan_us >= 1.4


def test_independent_tower_hides_the_all_reduce():
    a, wa = mlp(batch=256, d=1024, hid=8192, prefix="a_", y="ya")
    b, wb = mlp(batch=256, d=1024, hid=8192, prefix="b_", y="yb")
    graph = _model(a + b + [helper.make_node("Add", ["ya", "yb"], ["y"], name="sum")], {**wa, **wb}, 256, 1024)
    feeds = _feeds(graph)
    one = gx.Session(graph).run(feeds)
    two = gx.Session(graph, devices=2, parallel="tensor").run(feeds)
    np.testing.assert_allclose(two.outputs["y"], one.outputs["y"], rtol=1e-4, atol=1e-3)
    assert len(two.stats.extra["tensor_splits"]["split"]) == 2
    assert two.stats.comm_hidden >= 0.2


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
    rng = np.random.default_rng(4)
    mk = helper.make_node
    inits = {"wa": _w(rng, 128, 32, 3, 3), "ba": rng.standard_normal(128).astype(np.float32),
             "wb": _w(rng, 64, 128, 1, 1), "wc": _w(rng, 5, 128, 1, 1)}
    nodes = [mk("Conv", ["x", "wa", "ba"], ["a"], name="ca", pads=[1, 1, 1, 1]), mk("Relu", ["a"], ["r"], name="r"),
             mk("Conv", ["r", "wb"], ["b"], name="cb"), mk("Conv", ["r", "wc"], ["c"], name="cc"),
             mk("Concat", ["b", "c"], ["y"], name="cat", axis=1)]
    g = helper.make_graph(nodes, "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 32, 9, 9])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 69, 9, 9])],
                          [numpy_helper.from_array(v, k) for k, v in inits.items()])
    graph = gx.load(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
    feeds = _feeds(graph)
    one = gx.Session(graph).run(feeds)
    result = gx.Session(graph, devices=devices, parallel="tensor").run(feeds)
    np.testing.assert_allclose(result.outputs["y"], one.outputs["y"], rtol=1e-4, atol=1e-5)
    splits = result.stats.extra["tensor_splits"]
    assert [(x["nodes"], x["collective"]) for x in splits["split"]] == [(["ca"], "all_gather"), (["cb"], "all_gather")]
    assert splits["replicated"] == [{"node": "cc", "op": "Conv",
                                     "reason": f"its 5 output channels do not split over {devices} cards"}]
    sharded = (inits["wa"].nbytes + inits["ba"].nbytes + inits["wb"].nbytes) / devices + inits["wc"].nbytes
    assert result.stats.per_device[1]["weight_bytes"] == pytest.approx(sharded, rel=0.1)   # plus alignment
