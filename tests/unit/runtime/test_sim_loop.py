"""The event loop's third round of fast paths against the frozen plain simulator, bit for bit.

``sim_loop.drive`` does a kernel's lone placement and a lone kernel's end (with its
stream's next kernel's start) in the loop itself; each workload below leans on those and
on every reason to leave them to the ordinary step: other streams and their readies, a
record or wait at a stream's head, a wait that blocks, copies' timers, priorities, core
caps (none at all, too), the host stopping at its clock or at a stream's sync, a kernel's
start or end that launches more work or raises. Waves: equal waves run in one list of
their ends while other kernels wait for the same cores, and late in a run (where the
bound on their done checks fails and each is checked as the plain step checks it).
"""

from __future__ import annotations

import numpy as np
import pytest
from test_sim_fast import PLAIN, _profile, _seen
from test_sim_paths import Boom, _across

from graphexec.runtime import sim_loop, waves
from graphexec.runtime.device import Device
from graphexec.runtime.sim import DeviceTask


def _tiny(rng: np.random.Generator, s, **kw) -> DeviceTask:
    """A kernel of a few blocks, shorter than the task overhead (as most of a model's)."""
    blocks = int(rng.choice([1, 2, 3, 4, 6, 8, 32, 40]))
    nbytes = 0.0 if rng.random() < 0.2 else float(10 ** rng.uniform(2, 6))
    unit = ("vector", "cube", "aicpu")[int(rng.choice(3, p=[0.6, 0.35, 0.05]))]
    dtype = ("float16", "float32")[int(rng.integers(2))]
    return DeviceTask("kernel", s, "k", unit, blocks, float(10 ** rng.uniform(3, 7)), nbytes, dtype, **kw)


def _rounds(dev: Device, rng: np.random.Generator, ops: int) -> None:
    """Kernels on a few streams in turns (each alone on the device, their readies queued
    behind one another), with records, waits, copies, syncs and polls between them."""
    streams = [dev.default_stream] + [dev.create_stream(priority=int(rng.integers(0, 2)))
                                      for _ in range(int(rng.integers(0, 4)))]
    if rng.random() < 0.3:
        streams[-1].core_limit = {"vector": int(rng.integers(1, 4)), "cube": int(rng.integers(1, 40))}
    events = [dev.create_event() for _ in range(2)]
    for _ in range(ops):
        s, r, ev = streams[int(rng.integers(len(streams)))], rng.random(), events[int(rng.integers(2))]
        if r < 0.72:
            dev.launch(_tiny(rng, s))
        elif r < 0.8:
            dev.record_event(ev, s)
        elif r < 0.86 and ev.record_task is not None:
            dev.stream_wait_event(s, ev)
        elif r < 0.9:
            dev.memcpy_async(s, int(10 ** rng.uniform(2, 6)), ("h2d", "d2d")[int(rng.integers(2))])
        elif r < 0.95:
            dev.synchronize_stream(s)
        else:
            dev.host_t += float(rng.uniform(0, 30))
            dev.event_complete(ev)   # the host stops the device at its clock
    dev.synchronize_device()


@pytest.mark.parametrize("seed", range(40))
def test_kernels_in_turns_match_the_plain_simulator(use, seed):
    def observe(kind: str) -> tuple:
        rng = np.random.default_rng(7000 + seed)
        profile = _profile(rng)
        if seed % 4 == 0:   # no overhead: readies fall due at the ends that queue them
            profile = profile.model_copy(update={"task_overhead_us": 0.0})
        dev = Device(profile, graph_mode=bool(rng.random() < 0.5))
        _rounds(dev, rng, int(rng.integers(20, 150)))
        return _seen(dev)
    _across(use, observe)


def test_the_fast_loop_switched_off_matches(use, monkeypatch):
    """``FAST_LOOP = False`` (every step the ordinary one) gives the same run."""
    def observe(kind: str) -> tuple:
        rng = np.random.default_rng(7100)
        dev = Device("ascend910b", graph_mode=True)
        _rounds(dev, rng, 120)
        return _seen(dev)
    fast = observe("fast")
    monkeypatch.setattr(sim_loop, "FAST_LOOP", False)
    _across(use, observe)
    assert observe("fast") == fast


def _serial_with_callbacks(dev: Device, rng: np.random.Generator, boom_at: int) -> None:
    """One stream of kernels whose starts and ends launch kernels onto another stream, one
    of them raising at its end (the host syncs again after it)."""
    a, b = dev.default_stream, dev.create_stream()
    count = [0]

    def end(_: object) -> None:
        count[0] += 1
        if count[0] == boom_at:
            raise Boom
        if count[0] % 3 == 0:
            dev.launch(_tiny(rng, b))

    def start() -> None:
        if rng.random() < 0.2:
            dev.launch(_tiny(rng, b))

    for _ in range(60):
        dev.launch(_tiny(rng, a, start_fn=start, end_fn=end))
    with pytest.raises(Boom):
        dev.synchronize_device()
    dev.synchronize_device()


@pytest.mark.parametrize("seed", range(6))
def test_starts_and_ends_that_launch_or_raise_match(use, seed):
    def observe(kind: str) -> tuple:
        rng = np.random.default_rng(7200 + seed)
        dev = Device("ascend910", graph_mode=True)
        _serial_with_callbacks(dev, rng, boom_at=int(rng.integers(5, 40)))
        return _seen(dev)
    _across(use, observe)


def test_a_start_that_raises_leaves_the_same_state(use):
    """A kernel's start raises on the fast start path: it ends there, the rest runs."""
    def observe(kind: str) -> tuple:
        dev = Device("ascend910", graph_mode=True)
        s = dev.default_stream
        fired: list[int] = []

        def start() -> None:
            if not fired:
                fired.append(1)
                raise Boom

        for i in range(8):
            dev.launch(DeviceTask("kernel", s, "k", "vector", 2, 1e5, 1e3, "float16",
                                  start_fn=start if i == 3 else None))
        with pytest.raises(Boom):
            dev.synchronize_device()
        dev.synchronize_device()
        return _seen(dev)
    _across(use, observe)


@pytest.mark.parametrize("list_from", [0, 10])
@pytest.mark.parametrize("seed", range(8))
def test_equal_waves_while_others_wait_for_the_cores_match(use, monkeypatch, seed, list_from):
    """Long kernels of one pool on several streams: each runs its equal waves while the
    others wait for its cores (they get the rest of its last wave), the host looking in."""
    monkeypatch.setattr(waves, "ACCUMULATE_WAVES", list_from)

    def observe(kind: str) -> tuple:
        rng = np.random.default_rng(7300 + seed)
        dev = Device("ascend910", graph_mode=bool(seed % 2))
        streams = [dev.default_stream] + [dev.create_stream(priority=int(rng.integers(0, 2))) for _ in range(3)]
        if seed % 3 == 0:
            streams[2].core_limit = {"vector": int(rng.integers(8, 33))}
        for _ in range(int(rng.integers(6, 14))):
            blocks = int(rng.choice([40, 100, 333, 1000, 5000]))
            dev.launch(DeviceTask("kernel", streams[int(rng.integers(4))], "w", "vector", blocks,
                                  float(10 ** rng.uniform(5, 7)) * blocks, float(10 ** rng.uniform(2, 5)) * blocks))
            if rng.random() < 0.2:
                dev.host_t += float(rng.uniform(0, 100))
                dev.event_complete(dev.create_event())
        dev.synchronize_device()
        return _seen(dev)
    _across(use, observe)


@pytest.mark.parametrize("start", [0.0, 3e4, 1e7])
def test_equal_waves_of_tiny_blocks_late_in_a_run_match(use, start):
    """Blocks of a nanosecond: from a late enough clock a wave's end rounds so coarsely
    that the bound on the done checks no longer holds, and each wave is checked as the
    plain step checks it (some may then not count as done at their end)."""
    def observe(kind: str) -> tuple:
        dev = Device(PLAIN)
        s = dev.default_stream
        dev.host_t = start
        dev.event_complete(dev.create_event())
        for blocks in (32 * 50, 32 * 400 + 3):
            dev.launch(DeviceTask("kernel", s, "tiny", "vector", blocks, 1.0 * blocks, 0.0, "float16"))
        dev.synchronize_device()
        return _seen(dev)
    _across(use, observe)


def test_a_timer_due_at_a_lone_end_runs_in_that_step(use):
    """A lone kernel ends at the very instant the host's launch onto a more urgent stream
    comes due (round numbers, no task overhead): one step (the timer's, not the fast end)
    runs both, so both streams start their kernels in it and the more urgent one takes
    the cores first."""
    def observe(kind: str) -> tuple:
        profile = PLAIN.model_copy(update={"task_overhead_us": 0.0, "launch_cost_us": 1.0})
        dev = Device(profile)
        a, b = dev.create_stream(priority=1), dev.create_stream(priority=0)
        per_us = profile.unit_rate("vector", "float16")   # one block of ``per_us`` flops takes 1 us
        dev.launch(DeviceTask("kernel", a, "a1", "vector", 1, 4 * per_us, 0.0, "float16"))   # 1.0 to 5.0
        dev.launch(DeviceTask("kernel", a, "a2", "vector", 30, 30 * per_us, 0.0, "float16"))
        dev.host_t = 4.0
        dev.launch(DeviceTask("kernel", b, "b", "vector", 30, 30 * per_us, 0.0, "float16"))   # due at 5.0
        dev.synchronize_device()
        return _seen(dev)
    seen = observe("fast")
    starts = {row["name"]: row for row in seen[0]}
    assert starts["b"]["cores"] == 30 and starts["a2"]["cores"] < 30   # b came first
    _across(use, observe)
