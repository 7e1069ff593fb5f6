"""Eager mode's batched launches (``Device.batch_waits``: launches onto a full queue held and
submitted together) against launches that each wait at once, bit for bit: values, the
timeline, the host's launches, task numbers, the chrome trace and the allocator's stats
of an eager program that fills small queues on two streams with events, record_stream,
queries, a Module run and an NPUGraph replay between its ops."""

from __future__ import annotations

import numpy as np
import pytest

import graphexec as gx
import graphexec.npu as npu
from graphexec.npu._state import STATE
from graphexec.profiling.trace import chrome_trace
from graphexec.runtime import device as device_mod
from graphexec.runtime.profiles import load_profile


def _relu_module() -> npu.Module:
    b = gx.GraphBuilder("m", opset=17)
    x = b.input("x", "float32", [16, 16])
    b.output(b.Relu(x))
    return npu.Module(b.build())


def _program(depth: int) -> tuple:
    """An eager program on a card whose queues hold ``depth`` tasks; what it saw."""
    npu.init(load_profile("ascend910").model_copy(update={"queue_depth": depth, "max_tasks_per_stream": depth}))
    npu.manual_seed(0)
    side = npu.Stream(priority=-1)
    x, y = npu.randn(16, 16), npu.zeros(16, 16)
    start, end = npu.Event(enable_timing=True), npu.Event(enable_timing=True)
    module, g = _relu_module(), npu.NPUGraph()
    with npu.graph(g):
        z = (x * 2.0).relu()
    seen: list = []
    start.record()
    for i in range(240):
        x = x * 0.999 if i % 2 else x + 0.5
        if i % 37 == 5:   # the side stream reads x after an event, and x's block waits for it
            side.wait_stream(npu.current_stream())
            with npu.stream(side):
                y = y + x
            x.record_stream(side)
        if i % 53 == 7:
            seen.append(npu.current_stream().query())
        if i % 61 == 11:
            x = module(x) - 0.25
        if i % 71 == 3:
            g.replay()
    end.record()
    out = (x.numpy(), y.numpy(), z.numpy())
    end.synchronize()
    dev = STATE.card().device
    launches = [(h.task.name, h.task.seq, h.start, h.end) for h in dev.launches]
    return (out, seen, start.elapsed_time(end), dev.timeline(), launches, dev.sim.samples, dev.host_t,
            chrome_trace(dev), npu.memory_stats())


@pytest.mark.parametrize("depth", [4, 16, 2042])
def test_an_eager_program_batched_is_the_plain_one_bit_for_bit(monkeypatch, depth):
    held = []
    hold = device_mod.Device._hold
    monkeypatch.setattr(device_mod.Device, "_hold", lambda self, task: (held.append(1), hold(self, task))[1])
    batched = _program(depth)
    assert held or depth == 2042   # small queues filled: launches were held
    monkeypatch.setattr(device_mod, "BATCH", False)
    plain = _program(depth)
    for a, b in zip(batched[0], plain[0]):
        assert a.tobytes() == b.tobytes()
    assert batched[1:] == plain[1:]


def test_the_benchmark_chain_batched_is_the_plain_one(monkeypatch):
    """The 2,042-deep queue of ascend910 filled by 3,000 tiny ops, as eager_overhead.py runs them."""
    def chain() -> tuple:
        npu.init()
        x = npu.tensor(np.random.default_rng(0).standard_normal((16, 16)).astype(np.float32))
        for i in range(3000):
            x = x * 0.999 if i % 2 else x + 0.5
        dev = STATE.card().device
        assert dev.batch_waits and (len(dev._held) > 0) is device_mod.BATCH
        out = x.numpy()
        return out.tobytes(), dev.timeline(), [(h.start, h.end, h.task.seq) for h in dev.launches], dev.host_t

    batched = chain()
    monkeypatch.setattr(device_mod, "BATCH", False)
    assert batched == chain()


@pytest.mark.parametrize("reset", [False, True])
def test_a_core_cap_set_while_launches_are_held_applies_after_them(monkeypatch: pytest.MonkeyPatch,
                                                                   reset: bool) -> None:
    """set_stream_limit (or its reset) after launches were held on a full queue: those
    launches run as the plain ones would have, under the cap they were made under (found in
    review: they were submitted later, under the new cap)."""
    def program(batch: bool) -> tuple:
        monkeypatch.setattr(device_mod, "BATCH", batch)
        npu.init(load_profile("ascend910").model_copy(update={"queue_depth": 8, "max_tasks_per_stream": 8}))
        s = npu.Stream()
        a = npu.tensor(np.ones((256, 256), np.float32))
        with npu.stream(s):
            if reset:
                npu.set_stream_limit(s, 1, 1)
            for _ in range(40):
                a = a @ a * 0.001
            npu.reset_stream_limit(s) if reset else npu.set_stream_limit(s, 1, 1)
            for _ in range(10):
                a = a + 1.0
        npu.synchronize()
        dev = STATE.card().device
        return a.numpy().tobytes(), [(r["name"], r["start"], r["end"], r["cores"]) for r in dev.timeline()]

    assert program(True) == program(False)
