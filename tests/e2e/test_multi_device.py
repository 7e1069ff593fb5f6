"""Graphs across cards (issue 16): data parallelism on the light models at batch 8 on 2 and
4 cards matches one device within a tolerance (light_logits), the stats and the trace cover every card, and bad
multi-device options are refused with one line."""

from __future__ import annotations

import functools
import glob
import json
import os
from pathlib import Path

import light_logits
import numpy as np
import onnx
import pytest

import cli
import graphexec as gx
from graphexec.passes.free_batch import free_batch

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
MODELS = sorted(glob.glob(str(LIGHT / "*.onnx")))
BATCH = 8


@functools.cache
def light(path: str) -> tuple[gx.Graph, dict[str, np.ndarray], dict[str, np.ndarray]]:
    """The model (cut before a final Softmax: light_logits), batch-8 feeds and the outputs of one
    device running the whole batch.

    Every light model declares batch 1 (and bakes it into its Reshape targets); one
    device takes batch 8 once the batch is freed, as the multi-device session frees it
    for each card's share."""
    graph = light_logits.light_graph(path)
    name = graph.inputs[0]
    shape = (BATCH, *graph.values[name].type.shape[1:])
    feeds = {name: np.random.default_rng(0).standard_normal(shape).astype(np.float32)}
    return graph, feeds, gx.Session(free_batch(graph)).run(feeds).outputs




@pytest.mark.parametrize("devices", [2, 4])
@pytest.mark.parametrize("path", MODELS, ids=[os.path.basename(p)[6:-5] for p in MODELS])
def test_data_parallel_light_model_matches_one_device(path, devices):
    graph, feeds, one = light(path)
    result = gx.Session(graph, devices=devices, parallel="data").run(feeds)
    assert not light_logits.differences(result.outputs, one)
    s = result.stats
    assert s.num_devices == devices and [c["device"] for c in s.per_device] == list(range(devices))
    assert all(c["makespan_us"] > 0 and c["weight_bytes"] > 0 and c["peak_bytes"] > 0 for c in s.per_device)
    assert s.makespan_us >= max(c["makespan_us"] for c in s.per_device) - 1e-6
    assert s.comm_bytes == sum(c["comm_bytes"] for c in s.per_device) > 0
    assert s.comm_us > 0 and 0.0 <= s.comm_hidden <= 1.0
    _check_trace(result.trace, devices)


def _check_trace(trace: dict, devices: int) -> None:
    """One process per card (pid = device id) and the host after them; on every card no
    kernel starts before its input copy has landed, and the output copies start after
    the last kernel ends."""
    events = trace["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    assert sorted(names) == list(range(devices + 1)) and names[devices] == "host"
    assert all(names[i].startswith(f"device {i} ") for i in range(devices))
    for pid in range(devices):
        mine = [e for e in events if e["ph"] == "X" and e["pid"] == pid]
        h2d = [e for e in mine if e["cat"] == "memcpy" and e["args"]["kind"] == "h2d"]
        d2h = [e for e in mine if e["cat"] == "memcpy" and e["args"]["kind"] == "d2h"]
        kernels = [e for e in mine if e["cat"] == "kernel"]
        assert h2d and d2h and kernels
        assert min(k["ts"] for k in kernels) >= max(c["ts"] + c["dur"] for c in h2d) - 1e-6
        assert min(c["ts"] for c in d2h) >= max(k["ts"] + k["dur"] for k in kernels) - 1e-6


SQUEEZENET = str(LIGHT / "light_squeezenet.onnx")


def test_more_cards_are_faster_and_each_holds_a_share():
    graph, feeds, _ = light(SQUEEZENET)
    runs = {n: gx.Session(graph, devices=n).run(feeds).stats for n in (2, 4)}
    assert runs[4].makespan_us < runs[2].makespan_us
    assert runs[4].per_device[0]["peak_bytes"] < runs[2].per_device[0]["peak_bytes"]


@pytest.mark.parametrize("options", [dict(microbatches=2), dict(parallel="auto"), dict(streams=2),
                                     dict(device="ascend910b"), dict(check_hazards=True)],
                         ids=["microbatches", "auto", "streams", "910b", "hazards"])
def test_options_keep_the_outputs(options):
    graph, feeds, one = light(SQUEEZENET)
    result = gx.Session(graph, devices=2, **options).run(feeds)
    assert not light_logits.differences(result.outputs, one)
    assert result.stats.parallel == "data" and result.stats.extra.get("hazards", []) == []


def test_devices_1_is_the_single_device_session():
    graph = gx.load(SQUEEZENET)
    session = gx.Session(graph, devices=1, parallel="data")
    assert session.multi is None
    result = session.run(gx.default_feeds(graph))
    assert type(result.stats) is gx.Stats


def test_compare_over_devices():
    graph, feeds, _ = light(SQUEEZENET)
    cmp = gx.compare(graph, devices=[1, 2, 4], feeds=feeds)
    assert cmp.identical and [r.devices for r in cmp.rows] == [1, 2, 4]
    assert cmp.rows[0].speedup == 1.0 and cmp.rows[2].speedup > 1.0
    assert "comm hidden" in cmp.table()


@pytest.mark.parametrize("options,batch,message", [
    (dict(devices=16), 8, "devices=16: system atlas800-910 has 8 devices"),
    (dict(devices=3, system="atlas300i-duo"), 8, "system atlas300i-duo has 2 devices"),
    (dict(devices=2, parallel="bogus"), 8, "parallel must be one of"),
    (dict(devices=0), 8, "devices must be an int >= 1"),
    (dict(devices=4), 6, "batch 6 (axis 0), which 4 devices cannot split evenly"),
    (dict(devices=2, microbatches=3), 8, "which 2 devices x 3 micro-batches cannot split evenly"),
])
def test_bad_input_is_one_line(options, batch, message):
    graph, feeds, _ = light(SQUEEZENET)
    name = graph.inputs[0]
    with pytest.raises(gx.GraphExecError, match=message.replace("(", r"\(").replace(")", r"\)")) as err:
        gx.Session(graph, **options).run({name: feeds[name][:batch]})
    assert "\n" not in str(err.value)


def test_cli_run_on_devices(capsys, tmp_path):
    trace = tmp_path / "t.json"
    rc = cli.main(["run", SQUEEZENET, "--devices", "2", "--parallel", "data", "--shape", "data_0=8,3,224,224",
                   "--trace", str(trace), "--json"])
    assert rc == 0
    stats = json.loads(capsys.readouterr().out)["stats"]
    assert stats["num_devices"] == 2 and len(stats["per_device"]) == 2
    assert {e["pid"] for e in json.loads(trace.read_text())["traceEvents"]} == {0, 1, 2}
    assert cli.main(["run", SQUEEZENET, "--devices", "4"]) == 2   # the declared batch 1
    assert "cannot split evenly" in capsys.readouterr().err


def _relu_matmul(name: str, x: str) -> gx.Graph:
    b = gx.GraphBuilder(name, opset=17)
    b.output(b.Relu(b.MatMul(b.input(x, "float32", [4, 256]), b.constant(np.full((256, 256), 0.01, np.float32), "w"))))
    return b.build()


def test_cards_run_moves_a_value_between_cards():
    """The framework a pipeline builds on: card 1's plan runs on card 0's output, copied
    over the HCCS link behind card 0's events, on one clock."""
    from dataclasses import replace

    from graphexec.cluster.cards import CardsRun
    from graphexec.cluster.spread import Cluster, Spread
    from graphexec.engine.compiled import clone_graph, compile_graph
    from graphexec.engine.feeds import check_feeds
    from graphexec.plan import CompileOptions
    from graphexec.runtime.systems import load_system

    ga, gb = _relu_matmul("a", "x"), _relu_matmul("b", "y")
    cluster = Cluster(ga, CompileOptions(), Spread(load_system("atlas800-910"), 2, "data", 1))
    x = np.random.default_rng(0).standard_normal((4, 256)).astype(np.float32)
    plans = [compile_graph(clone_graph(g), replace(cluster.options, input_types=check_feeds(g, {g.inputs[0]: x})),
                           cluster.profile, cluster.device(i)) for i, g in enumerate((ga, gb))]
    run = CardsRun(cluster.server, [0, 1])
    a, b = run.bind(0, plans[0]), run.bind(1, plans[1])
    for ev in run.launch(a, [run.feed(a, {"x": x})]):
        cluster.device(1).stream_wait_event(b.card.copy_stream, ev)
    copy = run.copy(a, ga.outputs[0], b, "y")
    run.fetch(b, gb.outputs, run.launch(b, [run.record(cluster.device(1), b.card.copy_stream)]))
    run.finish()
    w = np.full((256, 256), 0.01, np.float32)
    np.testing.assert_allclose(run.outputs(b, gb.outputs)[gb.outputs[0]], np.maximum(np.maximum(x @ w, 0) @ w, 0),
                               rtol=1e-5)
    a_end = max(t.end_t for t in cluster.device(0).sim.finished if t.kind == "kernel")
    assert copy.meta == {"link": "HCCS", "src": 0, "dst": 1} and copy.start_t >= a_end


def test_each_card_holds_one_copy_of_the_weights_across_signatures():
    """Every card's plans are loaded by the single-card executor into the card's one weight
    store (``Cluster.load``): a second batch size uploads no weight again, and runs as a
    session of its own would."""
    graph, feeds, _ = light(MODELS[0])
    session = gx.Session(graph, devices=2, parallel="data", microbatches=2)
    session.run(feeds)
    stores = session.multi.cluster.weights
    before = {i: (s.uploads, s.uploaded_bytes, s.held_bytes) for i, s in stores.items()}
    assert sorted(before) == [0, 1] and all(u > 0 for u, _, _ in before.values())
    half = {k: v[: BATCH // 2] for k, v in feeds.items()}
    got = session.run(half).outputs
    assert {i: (s.uploads, s.uploaded_bytes, s.held_bytes) for i, s in stores.items()} == before
    alone = gx.Session(graph, devices=2, parallel="data", microbatches=2).run(half).outputs
    assert all(np.array_equal(got[k], alone[k]) for k in alone)
