"""The event loop's second round of fast paths against the frozen plain simulator, bit for bit.

Each workload below leans on one of them: the FIFO of kernels' ready timers merged with
the heap (timers and readies due at the same instant, a kernel's end raising midway through
a step's timers), a kernel placed alone on an idle device (serial chains, capped streams),
reused cohorts, shared waves that keep their rates unless demands tie, and equal waves run
in a plain loop or as one list of their ends (cut by host syncs at every point). Multi-device groups, host
syncs mid-run and small command queues come in through the random workloads.
"""

from __future__ import annotations

import numpy as np
import pytest
from test_sim_fast import KINDS, PLAIN, _kernel, _profile, _seen, _workload
from test_sim_fast_reference import PlainSimGroup

from graphexec.runtime import waves
from graphexec.runtime.device import Device
from graphexec.runtime.sim import DeviceTask, SimGroup


def _same(seen: dict) -> None:
    assert seen["fast"] == seen["plain"]
    assert seen["steps"] == seen["plain"]


def _across(use, observe) -> None:
    """``observe(kind)`` (a fresh device, its workload, what it saw) on every simulator: the same."""
    seen = {}
    for kind in KINDS:
        use(kind)
        seen[kind] = observe(kind)
    _same(seen)


def _serial(dev: Device, rng: np.random.Generator, ops: int) -> None:
    """Mostly one stream at a time: chains of kernels separated by records and waits, with
    the host syncing or polling now and then (each sync leaves the device idle)."""
    streams = [dev.default_stream, dev.create_stream(), dev.create_stream(priority=1)]
    if rng.random() < 0.3:
        streams[1].core_limit = {"vector": int(rng.integers(1, 5)), "cube": int(rng.integers(1, 5))}
    ev = dev.create_event()
    s = streams[0]
    for _ in range(ops):
        r = rng.random()
        if r < 0.1:
            s = streams[int(rng.integers(len(streams)))]
        if r < 0.7:
            blocks = int(rng.choice([1, 4, 8, 16, 32]))
            dev.launch(DeviceTask("kernel", s, "k", ("vector", "cube")[int(rng.integers(2))], blocks,
                                  float(10 ** rng.uniform(3, 8)), float(10 ** rng.uniform(2, 7)), "float16"))
        elif r < 0.8:
            dev.record_event(ev, s)
        elif r < 0.88 and ev.record_task is not None:
            dev.stream_wait_event(streams[int(rng.integers(len(streams)))], ev)
        elif r < 0.94:
            dev.synchronize_stream(s)
        else:
            dev.host_t += float(rng.uniform(0, 50))
            dev.event_complete(ev)
    dev.synchronize_device()


@pytest.mark.parametrize("seed", range(30))
def test_serial_chains_match_the_plain_simulator(use, seed):
    def observe(kind: str) -> tuple:
        rng = np.random.default_rng(1000 + seed)
        dev = Device(_profile(rng), graph_mode=bool(rng.random() < 0.5))
        _serial(dev, rng, int(rng.integers(10, 120)))
        return _seen(dev)
    _across(use, observe)


def _tied(dev: Device, rng: np.random.Generator) -> None:
    """Kernels of a few shapes whose bytes per flop are equal, on several streams: their
    demands tie, so shared waves must fall back to the full water-filling."""
    streams = [dev.default_stream] + [dev.create_stream() for _ in range(3)]
    streams[1].core_limit = {"vector": int(rng.integers(4, 20))}
    for _ in range(int(rng.integers(6, 20))):
        blocks = int(rng.choice([7, 40, 100, 257]))
        per = float(rng.choice([3e7, 6e7]))
        dev.launch(DeviceTask("kernel", streams[int(rng.integers(4))], "k", "vector", blocks,
                              per * blocks, 20 * per * blocks, "float16"))
        if rng.random() < 0.15:
            dev.host_t += float(rng.uniform(0, 200))
            dev.event_complete(dev.create_event())
    dev.synchronize_device()


@pytest.mark.parametrize("seed", range(20))
def test_shared_waves_with_tied_demands_match(use, seed):
    def observe(kind: str) -> tuple:
        dev = Device("ascend910", graph_mode=True)
        _tied(dev, np.random.default_rng(2000 + seed))
        return _seen(dev)
    _across(use, observe)


@pytest.mark.parametrize("chunk", [7, 4096])   # lists cut into pieces / as shipped
@pytest.mark.parametrize("list_from", [0, 10, 10_000])   # the list always / as shipped / the loop always
@pytest.mark.parametrize("waves_n", [3, 25, 130, 300])
def test_equal_waves_by_loop_or_list_match(use, monkeypatch, list_from, waves_n, chunk):
    """A lone kernel of ``waves_n`` equal waves, the host looking in at several points of
    them (each cuts the closed form short), then a kernel on another stream."""
    monkeypatch.setattr(waves, "ACCUMULATE_WAVES", list_from)
    monkeypatch.setattr(waves, "CHUNK", chunk)
    seen = {}
    for kind in KINDS:
        use(kind)
        dev = Device(PLAIN)
        a, b = dev.default_stream, dev.create_stream()
        dev.launch(DeviceTask("kernel", a, "long", "vector", 32 * waves_n + 5, 3e6 * waves_n, 1e6 * waves_n, "float32"))
        for host_t in (7.0, 30.0, 31.5, 90.0):
            dev.host_t = max(dev.host_t, host_t)
            dev.event_complete(dev.create_event())
        dev.launch(DeviceTask("kernel", b, "late", "vector", 40, 1e8, 1e6, "float16"))
        dev.synchronize_device()
        seen[kind] = _seen(dev)
    _same(seen)


def _same_time(dev: Device, rng: np.random.Generator) -> None:
    """Copies and records whose timers fall due at the same instants as kernels' ready
    timers (round numbers with a zero task overhead are what make the ties)."""
    streams = [dev.default_stream, dev.create_stream(), dev.create_stream()]
    ev = dev.create_event()
    for _ in range(int(rng.integers(10, 50))):
        s, r = streams[int(rng.integers(3))], rng.random()
        if r < 0.5:
            blocks, flops = int(rng.choice([1, 2, 32])), 1e6 * int(rng.integers(1, 4))
            dev.launch(DeviceTask("kernel", s, "k", "vector", blocks, flops, 0.0, "float16"))
        elif r < 0.7:
            dev.memcpy_async(s, int(rng.choice([0, 1000, 2000])), "d2d")
        elif r < 0.85:
            dev.record_event(ev, s)
        elif ev.record_task is not None:
            dev.stream_wait_event(s, ev)
    dev.synchronize_device()


@pytest.mark.parametrize("overhead", [0.0, 1.0])
@pytest.mark.parametrize("seed", range(10))
def test_timers_due_with_readies_keep_the_heap_order(use, seed, overhead):
    def observe(kind: str) -> tuple:
        rng = np.random.default_rng(3000 + seed)
        profile = _profile(rng).model_copy(update={"task_overhead_us": overhead, "launch_cost_us": 1.0})
        dev = Device(profile, graph_mode=bool(seed % 2))
        _same_time(dev, rng)
        return _seen(dev)
    _across(use, observe)


class Boom(Exception):
    pass


def test_an_end_that_raises_midway_leaves_the_same_state(use):
    """A kernel's end raises in the middle of a step's timers (copies' ends due with
    kernels' readies): the host catches it and synchronizes again; the rest of the run
    must be what the plain simulator makes of it."""
    seen = {}
    for kind in KINDS:
        use(kind)
        profile = PLAIN.model_copy(update={"task_overhead_us": 0.0})
        dev = Device(profile, graph_mode=True)
        a, b, c = dev.default_stream, dev.create_stream(), dev.create_stream()
        def boom(_: object, fired: list[int] = []) -> None:   # noqa: B006  (one list per run: it fires once)
            if not fired:
                fired.append(1)
                raise Boom

        for i in range(6):
            dev.memcpy_async(a, 1000, "d2d", end_fn=boom if i == 2 else None)
            dev.launch(DeviceTask("kernel", b, "k", "vector", 8, 1e6, 0.0, "float16"))
            dev.launch(DeviceTask("kernel", c, "k", "vector", 4, 2e6, 0.0, "float16"))
        with pytest.raises(Boom):
            dev.synchronize_device()
        dev.synchronize_device()
        seen[kind] = _seen(dev)
    _same(seen)


def test_a_stream_capped_to_no_core_stalls_alike(use):
    """A kernel that may take no core (its stream capped to zero) waits on an idle device
    forever: both simulators say the run stalled."""
    for kind in KINDS:
        use(kind)
        dev = Device(PLAIN)
        dev.default_stream.core_limit = {"vector": 0}
        dev.launch(DeviceTask("kernel", dev.default_stream, "k", "vector", 4, 1e6, 0.0, "float16"))
        with pytest.raises(RuntimeError, match="stalled"):
            dev.synchronize_device()


def _group(kind: str, seed: int) -> list[tuple]:
    """Three devices on one clock, serial chains on each, waits on the others' records and
    host syncs of single streams in the middle."""
    group = PlainSimGroup() if kind == "plain" else SimGroup()
    rng = np.random.default_rng(4000 + seed)
    devs = [Device("ascend910b", device_id=i, graph_mode=bool(rng.random() < 0.5), group=group) for i in range(3)]
    streams = [[d.default_stream, d.create_stream()] for d in devs]
    events = [d.create_event() for d in devs]
    for _ in range(int(rng.integers(20, 80))):
        i = int(rng.integers(3))
        s, r = streams[i][int(rng.integers(2))], rng.random()
        if r < 0.65:
            devs[i].launch(_kernel(rng, s))
        elif r < 0.8:
            devs[i].record_event(events[i], s)
        elif r < 0.92:
            j = int(rng.integers(3))
            if events[j].record_task is not None:
                devs[i].stream_wait_event(s, events[j])
        else:
            devs[i].synchronize_stream(s)
    for d in devs:
        d.synchronize_device()
    # The tasks' seq numbers are left out: the plain simulator's records push a wake-up
    # timer onto every other device with a blocked stream (the current one only where a
    # stream waits for that record), and each timer draws a number. Times, cores, samples
    # and the order tasks finished in are compared.
    return [(*_seen(d)[:4], [(t.kind, t.stream.id, t.name) for t in d.sim.finished]) for d in devs]


@pytest.mark.parametrize("seed", range(15))
def test_three_devices_on_one_clock_match(use, seed):
    _across(use, lambda kind: _group(kind, seed))


@pytest.mark.parametrize("seed", range(30))
def test_more_random_workloads_match(use, seed):
    """``test_sim_fast``'s random workloads on more seeds (queues of 2 to 11 tasks, host
    syncs and polls midway, capped streams, events across streams)."""
    def observe(kind: str) -> tuple:
        rng = np.random.default_rng(5000 + seed)
        dev = Device(_profile(rng), graph_mode=bool(rng.random() < 0.5))
        _workload(dev, rng, int(rng.integers(20, 120)))
        return _seen(dev)
    _across(use, observe)
