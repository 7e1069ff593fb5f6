"""Pipeline parallelism (issue 16): light models cut into stages on 2 and 4 cards with 1, 2
and 4 micro-batches match one device (within a tolerance: light_logits), the bubble shrinks as micro-batches
grow, no kernel reads a value before its copy from the previous card has landed, and a
model too big for one card's HBM runs when pipelined."""

from __future__ import annotations

import functools
from pathlib import Path

import light_logits
import numpy as np
import onnx
import pytest

import graphexec as gx
from graphexec.errors import OutOfMemoryError
from graphexec.passes.free_batch import free_batch
from graphexec.runtime.profiles import load_profile

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
MODELS = ["squeezenet", "zfnet512"]   # cheap ones (Conv, Concat branches; Gemms): the whole set takes minutes
BATCH = 8


@functools.cache
def light(name: str) -> tuple[gx.Graph, dict[str, np.ndarray], dict[str, np.ndarray]]:
    graph = light_logits.light_graph(LIGHT / f"light_{name}.onnx")   # cut before its Softmax
    x = graph.inputs[0]
    feeds = {x: np.random.default_rng(0).standard_normal((BATCH, *graph.values[x].type.shape[1:])).astype(np.float32)}
    return graph, feeds, gx.Session(free_batch(graph)).run(feeds).outputs




def _bits(outputs: dict) -> dict:
    """Bit for bit: for runs whose GEMMs have the same shapes on one machine (micro-batches against
    one device running the same micro-batches)."""
    return {k: (v.shape, v.dtype, v.tobytes()) for k, v in outputs.items()}


@pytest.mark.parametrize("microbatches", [1, 2, 4])
@pytest.mark.parametrize("devices", [2, 4])
@pytest.mark.parametrize("model", MODELS)
def test_pipeline_light_model_matches_one_device(model, devices, microbatches):
    graph, feeds, one = light(model)
    result = gx.Session(graph, devices=devices, parallel="pipeline", microbatches=microbatches).run(feeds)
    assert not light_logits.differences(result.outputs, one)
    s = result.stats
    assert s.parallel == "pipeline" and s.num_devices == devices and s.microbatches == microbatches
    assert [c["device"] for c in s.per_device] == list(range(devices))
    # every card computes; a stage may hold no weights (squeezenet's last cut before its logits is
    # the pooling tail once ATC-style fusion made each Conv+Relu one task)
    assert all(c["compute_us"] > 0 for c in s.per_device) and sum(c["weight_bytes"] for c in s.per_device) > 0
    assert 0.0 < s.extra["bubble"] < 1.0 and len(s.extra["stages"]) == devices
    assert s.comm_bytes > 0 and s.comm_us > 0 and 0.0 <= s.comm_hidden <= 1.0
    _check_copies(result.trace, devices, microbatches)


def _check_copies(trace: dict, devices: int, microbatches: int) -> None:
    """On every card after the first: each value copied in from another card arrives once
    per micro-batch into a receive slot, and is copied from there into the stage's input
    buffer (on-card) only after it arrived; every kernel reading it starts after such a
    copy-in ended and overlaps none (the next copy-in waits until the card finished the
    micro-batch)."""
    events = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    for pid in range(1, devices):
        peer: dict[str, list[tuple[float, float]]] = {}
        local: dict[str, list[tuple[float, float]]] = {}
        for e in events:
            if e["pid"] != pid or e["cat"] != "memcpy":
                continue
            value, span = e["name"].rsplit(" ", 1)[-1], (e["ts"], e["ts"] + e["dur"])
            if str(e["args"]["kind"]).startswith("p2p"):
                assert e["args"]["dst"] == pid and e["args"]["src"] < pid
                peer.setdefault(value, []).append(span)
            elif e["args"]["kind"] == "d2d":
                local.setdefault(value, []).append(span)
        assert peer, f"card {pid} received nothing"
        for value, spans in peer.items():
            ins = sorted(local[value])
            assert len(spans) == microbatches and len(ins) == microbatches, value
            assert all(b <= c + 1e-6 for (_, b), (c, _) in zip(sorted(spans), ins)), f"{value} copied in before it came"
            readers = [e for e in events if e["pid"] == pid and e["cat"] == "kernel"
                       and value in e["args"].get("inputs", [])]
            landed = set()
            for k in readers:
                start, end = k["ts"], k["ts"] + k["dur"]
                assert not any(a < end - 1e-6 and start < b - 1e-6 for a, b in ins), (value, k["name"])
                before = sum(b <= start + 1e-6 for _, b in ins)
                assert before >= 1, f"{k['name']} on card {pid} reads {value} before it arrived"
                landed.add(before)
            assert not readers or landed == set(range(1, microbatches + 1))


def _mlp(layers: int = 8, width: int = 1024) -> gx.Graph:
    """Identical MatMul+Relu layers: a model that cuts into equal stages."""
    b = gx.GraphBuilder("mlp", opset=17)
    x = b.input("x", "float32", ["batch", width])
    rng = np.random.default_rng(1)
    for i in range(layers):
        w = (rng.standard_normal((width, width)) / np.sqrt(width)).astype(np.float32)
        x = b.Relu(b.MatMul(x, b.constant(w, f"w{i}")))
    b.output(x)
    return b.build()


def _mlp_feeds() -> dict[str, np.ndarray]:
    return {"x": np.random.default_rng(2).standard_normal((BATCH, 1024)).astype(np.float32)}


def _one_device(graph: gx.Graph, feeds: dict, parts: int) -> dict:
    """One device running the micro-batches one after the other (BLAS rounds a MatMul
    differently for another number of rows, so the batch-8 run is only allclose)."""
    session, step = gx.Session(graph), BATCH // parts
    outs = [session.run({"x": feeds["x"][i * step:(i + 1) * step]}).outputs for i in range(parts)]
    return {k: np.concatenate([o[k] for o in outs]) for k in outs[0]}


def test_bubble_shrinks_as_microbatches_grow():
    graph, feeds = _mlp(), _mlp_feeds()
    whole = gx.Session(graph).run(feeds).outputs
    bubbles = []
    for m in (1, 2, 4, 8):
        r = gx.Session(graph, devices=2, parallel="pipeline", microbatches=m).run(feeds)
        assert _bits(r.outputs) == _bits(_one_device(graph, feeds, m))
        np.testing.assert_allclose(r.outputs["relu_7_out"], whole["relu_7_out"], rtol=1e-5, atol=1e-6)
        assert [st["nodes"] for st in r.stats.extra["stages"]] == [8, 8]   # balanced: 4 layers each
        bubbles.append(r.stats.extra["bubble"])
    assert bubbles == sorted(bubbles, reverse=True) and bubbles[0] - bubbles[-1] > 0.2, bubbles
    _check_copies(r.trace, 2, 8)


def test_estimate_and_auto():
    graph, feeds = _mlp(), _mlp_feeds()
    session = gx.Session(graph, devices=2, parallel="pipeline", microbatches=4)
    estimate = session.multi.estimate(feeds)
    assert estimate == pytest.approx(session.run(feeds).stats.makespan_us, rel=1e-6)
    auto = gx.Session(graph, devices=2, parallel="auto", microbatches=4).run(feeds)
    assert "pipeline" in auto.stats.extra["auto"]


def test_too_big_for_one_card_runs_pipelined():
    graph, feeds = _mlp(), _mlp_feeds()   # 32 MiB of weights
    small = load_profile("ascend910").model_copy(update={"hbm_capacity_bytes": 24 << 20})
    with pytest.raises(OutOfMemoryError):
        gx.Session(graph, device=small).run(feeds)
    result = gx.Session(graph, device=small, devices=2, parallel="pipeline", microbatches=2).run(feeds)
    assert _bits(result.outputs) == _bits(_one_device(graph, feeds, 2))
    assert all(c["weight_bytes"] <= 16 << 20 for c in result.stats.per_device)


@pytest.mark.parametrize("devices,microbatches,message", [
    (2, 3, "input 'x' has batch 8 (axis 0), which 3 micro-batches cannot split evenly"),
    (4, 1, "pipeline: 4 stages but the graph has only 2 nodes to cut into stages"),
])
def test_bad_input_is_one_line(devices, microbatches, message):
    graph = _mlp(layers=1) if devices == 4 else _mlp()
    with pytest.raises(gx.GraphExecError) as err:
        gx.Session(graph, devices=devices, parallel="pipeline", microbatches=microbatches).run(_mlp_feeds())
    assert message in str(err.value) and "\n" not in str(err.value)


def test_double_buffered_copies_race_nothing():
    """The receive and send slots are reused every other micro-batch: the hazard checker
    (which does report a copy-in that does not wait for the stage) finds no unordered
    access on any card, and the copies overlap compute."""
    graph, feeds, one = light("squeezenet")
    result = gx.Session(graph, devices=2, parallel="pipeline", microbatches=4, check_hazards=True).run(feeds)
    assert not light_logits.differences(result.outputs, one)
    assert result.stats.extra["hazards"] == []
    assert result.stats.comm_hidden >= 0.2


def test_real_encoder_on_eight_cards_is_bit_identical():
    """MiniLM-L3 (a real export, int64 inputs and shape arithmetic) cut over 8 cards: some
    crossing values are not in a stage's device memory (sized or kept on the host), and
    travel as they are, without send slots."""
    import sys
    from dataclasses import replace

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import real_models as rm

    entry = next(e for e in rm.MANIFEST if e.name == "minilm_l3_paraphrase")
    path = rm.fetch(entry)
    if path is None:
        pytest.skip(f"minilm_l3_paraphrase: {rm.fetch_reason(entry)}")
    feeds = rm.make_feeds(replace(entry, shapes={n: (8, 16) for n, _, _ in rm.model_inputs(path)}), path)
    graph = gx.load(str(path))
    one = gx.Session(graph).run(feeds).outputs
    result = gx.Session(graph, devices=8, parallel="pipeline", microbatches=4).run(feeds)
    assert not light_logits.differences(result.outputs, one)
