"""Module runs a compiled plan as one launch; NPUGraph captures once and replays."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import graphexec as gx
import graphexec.npu as npu
from graphexec.errors import GraphExecError

MODEL = Path(__file__).resolve().parents[3] / "models" / "inception_block.onnx"


def test_module_matches_a_session_bit_for_bit():
    x = np.random.default_rng(0).standard_normal((1, 192, 28, 28)).astype(np.float32)
    ref = gx.Session(gx.load(MODEL), streams=2).run({"data": x}).outputs["out"]
    model = npu.Module(gx.load(MODEL), streams=2)
    out = model(npu.tensor(x))
    assert out.device == "npu:0" and out.numpy().tobytes() == ref.tobytes()
    again = model(npu.tensor(x) * 1.0)
    assert again.numpy().tobytes() == ref.tobytes()


def test_module_pays_one_launch_for_its_tasks():
    model = npu.Module(gx.load(MODEL))
    x = npu.randn(1, 192, 28, 28)
    model(x)             # the first call compiles and uploads the weights (host copies)
    npu.synchronize()
    dev = npu.timeline
    before = len(dev())
    t0 = _host_t()
    model(x)
    host = _host_t() - t0
    npu.synchronize()
    kernels = [t for t in dev()[before:] if t["kind"] == "kernel"]
    launch = _launch_cost()
    assert len(kernels) >= 5 and host == pytest.approx(launch)   # the inception block fused: 7 kernels


def _host_t():
    from graphexec.npu._state import STATE

    return STATE.card(0).device.host_t


def _launch_cost():
    from graphexec.npu._state import STATE

    return STATE.card(0).device.profile.launch_cost_us


def _step(x, w):
    return npu.ops.tanh(x @ w + 0.25) * 0.5


def test_graph_capture_replays_eager_results_with_one_launch():
    rng = np.random.default_rng(1)
    w = npu.tensor(rng.standard_normal((32, 32)).astype(np.float32))
    x_host = rng.standard_normal((8, 32)).astype(np.float32)
    eager = _step(_step(npu.tensor(x_host), w), w).numpy()
    static_x = npu.tensor(x_host)
    npu.synchronize()
    g = npu.NPUGraph()
    s = npu.Stream()
    with npu.graph(g, stream=s):
        static_y = _step(_step(static_x, w), w)
    assert g.num_launches == 8
    t0 = _host_t()
    g.replay()
    assert _host_t() - t0 == pytest.approx(_launch_cost())   # the launch cost paid once
    s.synchronize()
    assert static_y.numpy().tobytes() == eager.tobytes()
    x2 = rng.standard_normal((8, 32)).astype(np.float32)
    static_x.copy_(npu.tensor(x2))
    npu.synchronize()
    g.replay()
    s.synchronize()
    assert static_y.numpy().tobytes() == _step(_step(npu.tensor(x2), w), w).numpy().tobytes()


def test_replay_before_capture_and_nested_capture_are_refused():
    g = npu.NPUGraph()
    with pytest.raises(GraphExecError, match="never captured"):
        g.replay()
    with npu.graph(g):
        with pytest.raises(GraphExecError, match="do not nest"):
            with npu.graph(npu.NPUGraph()):
                pass


def test_module_refuses_host_tensors():
    with pytest.raises(GraphExecError, match="device tensor"):
        npu.Module(gx.load(MODEL))(npu.randn(1, 192, 28, 28, device="cpu"))


def test_module_runs_are_ordered_with_eager_work_on_their_stream():
    npu.init(check_hazards=True)
    model = npu.Module(gx.load(MODEL), streams=2)
    x = npu.randn(1, 192, 28, 28) * 0.5          # eager work, then the plan, then eager work again
    y = npu.ops.relu(model(x)) + 1
    npu.synchronize()
    assert npu.hazards() == []
    ref = gx.Session(gx.load(MODEL), streams=2).run({"data": x.numpy()}).outputs["out"]
    assert y.numpy().tobytes() == (np.maximum(ref, 0) + np.float32(1)).tobytes()


def test_a_graph_across_cards_replays_in_capture_order_and_moves_the_bytes_each_time():
    """Card 1's work is captured first and waits on a copy from card 0: replaying card by
    card waited on a record not yet made ('never recorded'), and the copy's task, launched
    again, moved nothing the second time. The copy's wait stays on the stream current at
    capture even when card 1's current stream changes before a replay."""
    npu.init(system="atlas800-910", check_hazards=True)
    x0 = npu.tensor(np.ones(256, np.float32), device="npu:0")
    x1 = npu.tensor(np.full(256, 3, np.float32), device="npu:1")
    npu.synchronize()
    g = npu.NPUGraph()
    with npu.graph(g):
        a = x1 * 2                  # card 1 first
        b = (x0 + 1) * 5            # card 0
        d = b.to("npu:1") + a       # a peer copy, then card 1 again
    for value in (2.0, 4.0):
        x0.copy_(npu.tensor(np.full(256, value, np.float32), device="npu:0"))
        npu.synchronize()
        npu.set_device(1)
        npu.set_stream(npu.Stream())   # another current stream on card 1: the replay must not follow it
        npu.set_device(0)
        g.replay()
        for card in (0, 1):
            npu.set_device(card)
            npu.synchronize()
        npu.set_device(0)
        assert d.numpy().tolist() == [(value + 1) * 5 + 6] * 256
    assert npu.hazards() == []
