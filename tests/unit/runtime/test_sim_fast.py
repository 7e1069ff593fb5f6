"""The fast simulator (waves in one loop, the unrolled step) against the plain one, bit for bit.

``test_sim_fast_reference.py`` holds the simulator as it was before its fast paths. Random
device workloads (kernels from one block to thousands of waves, several units and streams
with priorities and core caps, events across streams and devices, copies, host syncs
mid-run, full command queues) and light models run on both; every simulated time, core
count, sample and stat must come out equal with ``==`` (no tolerance).
"""

from __future__ import annotations

import os
from dataclasses import replace

import numpy as np
import onnx
import pytest
from test_sim_fast_reference import PlainSimGroup

import graphexec as gx
from graphexec.runtime.device import Device
from graphexec.runtime.profiles import load_profile
from graphexec.runtime.sim import DeviceTask, SimGroup

LIGHT = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
# the plain roofline (no kernel model): kernels keep one block per tile, so these tests drive
# the waves and the fast paths' many-block cases (``test_kernel_time.py`` checks the model)
PLAIN = load_profile("ascend910").model_copy(update={"kernels": None})
KINDS = ("fast", "steps", "plain")   # waves in one loop / one step per wave / the reference


def _kernel(rng: np.random.Generator, stream) -> DeviceTask:
    unit = ("cube", "vector", "aicpu")[int(rng.integers(3))]
    blocks = int(rng.choice([1, 2, 7, 16, 31, 32, 33, 48, 100, 257, 1000, 4500]))
    nbytes = 0.0 if rng.random() < 0.3 else float(10 ** rng.uniform(2, 9))
    return DeviceTask("kernel", stream, "k", unit, blocks, float(10 ** rng.uniform(3, 10)), nbytes,
                      ("float16", "float32")[int(rng.integers(2))])


def _workload(dev: Device, rng: np.random.Generator, ops: int) -> None:
    """Random launches on ``dev``; the same ``rng`` state gives the same calls."""
    streams = [dev.default_stream] + [dev.create_stream(priority=int(rng.integers(0, 3)))
                                      for _ in range(int(rng.integers(0, 4)))]
    if rng.random() < 0.3:   # a stream capped to a few cores per unit
        streams[-1].core_limit = {"vector": int(rng.integers(1, 9)), "cube": int(rng.integers(1, 9))}
    events = [dev.create_event() for _ in range(3)]
    for _ in range(ops):
        s, r = streams[int(rng.integers(len(streams)))], rng.random()
        ev = events[int(rng.integers(len(events)))]
        if r < 0.6:
            dev.launch(_kernel(rng, s))
        elif r < 0.72:
            dev.record_event(ev, s)
        elif r < 0.84 and ev.record_task is not None:
            dev.stream_wait_event(s, ev)
        elif r < 0.92:
            dev.memcpy_async(s, int(10 ** rng.uniform(2, 8)), ("h2d", "d2h", "d2d")[int(rng.integers(3))])
        elif r < 0.96:
            dev.synchronize_stream(s)
        else:
            dev.event_complete(ev)   # the host's clock moves the device up to it
    dev.synchronize_device()


def _seen(dev: Device) -> tuple:
    """Everything the simulation decided, as exact values."""
    return (dev.timeline(), dev.sim.samples, dev.host_t, dev.sim.now, [(t.kind, t.seq) for t in dev.sim.finished])


def _profile(rng: np.random.Generator):
    p = load_profile(("ascend910", "ascend910b", "ascend310p")[int(rng.integers(3))])
    if rng.random() < 0.5:   # half the cases as a plain roofline: many blocks, waves
        p = p.model_copy(update={"kernels": None})
    return p.model_copy(update={"queue_depth": int(rng.integers(2, 12))}) if rng.random() < 0.4 else p


@pytest.mark.parametrize("seed", range(60))
def test_random_workloads_match_the_plain_simulator(use, seed):
    seen = {}
    for kind in KINDS:
        use(kind)
        rng = np.random.default_rng(seed)
        dev = Device(_profile(rng), graph_mode=bool(rng.random() < 0.5))
        _workload(dev, rng, int(rng.integers(5, 80)))
        seen[kind] = _seen(dev)
    assert seen["fast"] == seen["plain"]
    assert seen["steps"] == seen["plain"]


def _group_run(kind: str, seed: int) -> list[tuple]:
    """Two devices on one clock, streams of one waiting on events of the other."""
    group = PlainSimGroup() if kind == "plain" else SimGroup()
    rng = np.random.default_rng(seed)
    devs = [Device("ascend910b", device_id=i, graph_mode=True, group=group) for i in range(2)]
    streams = [[d.default_stream, d.create_stream()] for d in devs]
    events = [d.create_event() for d in devs]
    for _ in range(int(rng.integers(10, 60))):
        i = int(rng.integers(2))
        s, r = streams[i][int(rng.integers(2))], rng.random()
        if r < 0.7:
            devs[i].launch(_kernel(rng, s))
        elif r < 0.85:
            devs[i].record_event(events[i], s)
        elif events[1 - i].record_task is not None:   # wait on the other device's record
            devs[i].stream_wait_event(s, events[1 - i])
    for d in devs:
        d.synchronize_device()
    return [_seen(d) for d in devs]


@pytest.mark.parametrize("seed", range(25))
def test_two_devices_on_one_clock_match_the_plain_simulator(use, seed):
    seen = {}
    for kind in KINDS:
        use(kind)
        seen[kind] = _group_run(kind, seed)
    assert seen["fast"] == seen["plain"]
    assert seen["steps"] == seen["plain"]


def test_long_wave_runs_take_the_closed_form_and_match(use):
    """Thousands of equal waves alone on the device (the numpy sums), cut by a host sync
    in the middle of them and by a later kernel on another stream."""
    seen = {}
    for kind in KINDS:
        use(kind)
        dev = Device(PLAIN)
        a, b = dev.default_stream, dev.create_stream()
        dev.launch(DeviceTask("kernel", a, "long", "vector", 32 * 5000 + 7, 3e9, 2e9, "float32"))
        dev.host_t = 300.0    # the host asks in the middle of the waves
        dev.event_complete(dev.create_event())
        dev.launch(DeviceTask("kernel", b, "late", "vector", 40, 1e8, 1e6, "float16"))
        dev.synchronize_device()
        seen[kind] = _seen(dev)
    assert seen["fast"] == seen["plain"] and seen["steps"] == seen["plain"]
    assert seen["fast"][0][0]["cores"] == 32


@pytest.mark.parametrize("model", ["light_squeezenet", "light_vgg19", "light_inception_v1"])
def test_light_models_simulate_alike(use, model):
    graph = gx.load(os.path.join(LIGHT, model + ".onnx"))
    feeds = gx.default_feeds(graph)
    out = {}
    for kind in KINDS:
        use(kind)
        result = gx.Session(graph, streams=4).simulate(feeds)
        out[kind] = (replace(result.stats, compile_s=0.0), result.trace)
    assert out["fast"] == out["plain"] and out["steps"] == out["plain"]


@pytest.mark.parametrize("blocks", [(10, 1000), (7, 3001), (3, 500), (13, 2222)])
def test_waves_beside_a_kernel_of_equal_demand_match(use, blocks):
    """Two memory-bound kernels with the same bytes per flop (equal demand whatever their
    block counts, so HBM shares depend on the cohorts' order): the one in waves started
    first (capped, so the other finds cores), and each of its new cohorts goes last, as
    the plain step's does."""
    seen = {}
    for kind in KINDS:
        use(kind)
        dev = Device("ascend910", graph_mode=True)
        a, b = dev.default_stream, dev.create_stream()
        few, many = blocks
        a.core_limit = {"vector": 32 - few}
        dev.launch(DeviceTask("kernel", a, "many", "vector", many, 3e7 * many, 7e8 * many, "float16"))
        dev.launch(DeviceTask("kernel", b, "few", "vector", few, 3e9 * few, 7e10 * few, "float16"))
        dev.synchronize_device()
        seen[kind] = _seen(dev)
    assert seen["fast"] == seen["plain"] and seen["steps"] == seen["plain"]


def test_a_record_wakes_only_the_streams_waiting_for_it():
    """Streams blocked on a wait are kept per record: a record wakes only its waiters (all
    blocked streams were woken at every record: quadratic on long graphs of many streams)."""
    from graphexec.runtime.device import Device
    from graphexec.runtime.sim import DeviceTask

    dev = Device(PLAIN)
    streams = [dev.create_stream() for _ in range(6)]
    events = [dev.create_event() for _ in range(3)]
    for i, e in enumerate(events):   # kernels of growing length before each record: the waits block
        dev.launch(DeviceTask("kernel", streams[i], f"k{i}", flops=1e9 * (i + 1)))
        dev.record_event(e, streams[i])
    for e, s in zip(events, streams[3:]):
        dev.stream_wait_event(s, e)
    woken: list[int] = []
    run = dev.sim._run_stream
    dev.sim._run_stream = lambda s: (woken.append(s.id), run(s))[1]
    dev.synchronize_device()
    # each waiting stream runs three times: it blocks, its own record wakes it (its wait
    # starts and ends), and the wait's end looks at it again; other records leave it be
    assert [woken.count(s.id) for s in streams[3:]] == [3, 3, 3]
