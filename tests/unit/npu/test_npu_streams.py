"""Streams and events with torch_npu's names, ordering, timing, hazards and core limits."""

from __future__ import annotations

import numpy as np
import pytest

import graphexec.npu as npu
from graphexec.errors import GraphExecError


def _busy(x, n=10):
    for _ in range(n):
        x = x @ x * 0.001
    return x


def test_current_default_and_stream_ids():
    assert npu.current_stream() == npu.default_stream() and npu.default_stream().stream_id == 0
    s = npu.Stream(stream_id=1)
    assert s == npu.Stream(stream_id=1) and s != npu.default_stream()
    with npu.stream(s):
        assert npu.current_stream() == s
    assert npu.current_stream() == npu.default_stream()
    npu.set_stream(s)
    assert npu.current_stream() == s
    assert npu.Stream(priority=-1).priority == -1 and npu.Stream().priority == 0


def test_work_runs_on_the_current_stream():
    s = npu.Stream()
    x = npu.ones(64, 64)
    npu.synchronize()
    with npu.stream(s):
        y = npu.ops.relu(x)
    npu.synchronize()
    relus = [t for t in npu.timeline() if t["name"] == "Relu"]
    assert [t["stream"] for t in relus] == [s.stream_id]
    assert y.numpy().sum() == 64 * 64


def test_wait_event_orders_streams_and_elapsed_time_is_simulated_ms():
    s1, s2 = npu.Stream(), npu.Stream()
    x = npu.ones(512, 512)
    npu.synchronize()
    start, end = npu.Event(enable_timing=True), npu.Event(enable_timing=True)
    with npu.stream(s1):
        start.record()
        y = _busy(x)
        end.record()
    s2.wait_event(end)
    with npu.stream(s2):
        z = y + 1
    end.synchronize()
    assert end.query() and start.query()
    s2.synchronize()
    tl = npu.timeline()
    last_mm = max(t["end"] for t in tl if t["name"] == "MatMul")
    add = next(t for t in tl if t["name"] == "Add" and t["stream"] == s2.stream_id)
    assert add["start"] >= last_mm
    ms = start.elapsed_time(end)
    assert ms == pytest.approx((last_mm - min(t["start"] for t in tl if t["name"] == "MatMul")) / 1000, rel=0.2)
    with npu.stream(s2):
        np.testing.assert_allclose(z.cpu().numpy(), y.cpu().numpy() + 1)


def test_wait_stream_and_query():
    s1 = npu.Stream()
    x = npu.ones(512, 512)
    npu.synchronize()
    with npu.stream(s1):
        y = _busy(x)
    assert not s1.query()
    npu.current_stream().wait_stream(s1)
    z = y * 2
    npu.synchronize()
    assert s1.query() and z.numpy().shape == (512, 512)


def test_stream_arguments_are_torch_npus():
    assert npu.Stream(device_index=0, stream_id=3).stream_id == 3
    with pytest.raises(GraphExecError, match="steam_id"):
        npu.Stream(steam_id=1)
    with pytest.raises(GraphExecError, match="priority"):
        npu.Stream(priority="high")


def test_elapsed_time_needs_timing_events():
    a, b = npu.Event(), npu.Event()
    a.record()
    b.record()
    with pytest.raises(GraphExecError, match="enable_timing"):
        a.elapsed_time(b)


def test_reading_another_streams_write_without_an_event_is_a_hazard():
    npu.init(check_hazards=True)
    s1 = npu.Stream()
    x = npu.ones(256, 256)
    npu.synchronize()
    with npu.stream(s1):
        y = _busy(x, 3)
    z = y + 1                        # the default stream reads y while s1 may still write it
    npu.synchronize()
    hz = npu.hazards()
    assert hz and any(h.to_dict()["kind"] == "RAW" for h in hz), [str(h) for h in hz]
    del z


def test_the_same_program_with_an_event_has_no_hazard():
    npu.init(check_hazards=True)
    s1 = npu.Stream()
    x = npu.ones(256, 256)
    npu.synchronize()
    with npu.stream(s1):
        y = _busy(x, 3)
    npu.current_stream().wait_stream(s1)
    z = y + 1
    npu.synchronize()
    assert npu.hazards() == [] and z.numpy().shape == (256, 256)


def test_set_stream_limit_caps_the_cores_of_its_kernels():
    s = npu.Stream()
    x = npu.ones(2048, 2048)
    npu.synchronize()                # s reads x: its fill on the default stream must be done
    npu.set_stream_limit(s, 4, 4)
    assert npu.get_stream_limit(s) == {"cube_core_num": 4, "vector_core_num": 4}
    with npu.stream(s):
        y = x @ x
    z = x @ x
    npu.synchronize()
    mm = {t["stream"]: t for t in npu.timeline() if t["name"] == "MatMul"}
    assert mm[s.stream_id]["cores"] == 4 and mm[0]["cores"] > 4
    capped, free = (mm[k]["end"] - mm[k]["start"] for k in (s.stream_id, 0))
    assert capped > 2 * free
    np.testing.assert_array_equal(y.numpy(), z.numpy())
    npu.reset_stream_limit(s)
    with pytest.raises(GraphExecError, match="cube_num"):
        npu.set_stream_limit(s, 0, 4)


@pytest.mark.parametrize("plain", [False, True])
def test_waiting_on_a_reset_or_other_cards_event_is_refused_and_the_card_runs_on(monkeypatch, plain):
    """An event recorded on a card that was since reset (or on another card) lives on another
    simulator's clock: a wait on it was accepted and nothing could wake it, so the stream never
    ran again ('simulation stalled' at every later call; issue 39's eager fuzz). Refused at the
    wait now, on the lone-kernel shortcut and on the plain path alike."""
    if plain:
        monkeypatch.setenv("GRAPHEXEC_PLAIN", "1")
    npu.init(device_count=2)
    npu.ones(64, 64, device="npu") @ npu.ones(64, 64, device="npu")   # the old card's clock runs ahead
    old = npu.Event()
    old.record()
    npu.reset_device()
    with pytest.raises(GraphExecError, match=r"\(107017\): device npu:0 was reset"):
        npu.current_stream().wait_event(old)
    with pytest.raises(GraphExecError, match=r"\(107017\)"):
        old.wait()
    other = npu.Event()
    other.record(npu.Stream(device="npu:1"))
    with pytest.raises(GraphExecError, match=r"ACL_ERROR_RT_STREAM_CONTEXT \(107003\): Stream.wait_event: the event "
                                             r"was recorded on npu:1, the stream is on npu:0"):
        npu.current_stream().wait_event(other)
    assert (npu.ones(3, device="npu") + 1).cpu().numpy().tolist() == [2.0, 2.0, 2.0]
    npu.synchronize()
