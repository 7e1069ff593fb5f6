"""Launches held while a queue is full (``Device.batch_waits``, eager mode's) against the
plain launch that waits at once, bit for bit.

A held launch is submitted later, in order, as the plain launch would have been: the same
waits, host clock and submission order, so the same schedule. Random workloads that fill
small queues (tiny kernels a slow host launches, big kernels that keep the host waiting,
several streams with priorities and core caps, events and waits across them, copies,
host syncs and blocking copies mid-run) run both ways; every simulated time, host launch,
task number, sample, finish order and end-callback order must be equal with ``==``.
"""

from __future__ import annotations

import numpy as np
import pytest

from graphexec.runtime import device as device_mod
from graphexec.runtime.device import Device
from graphexec.runtime.profiles import load_profile
from graphexec.runtime.sim import DeviceTask


def _kernel(rng: np.random.Generator, stream, ends: list, i: int) -> DeviceTask:
    big = rng.random() < 0.25   # mostly tiny kernels (the host is the slow side), some big ones
    blocks = int(rng.choice([1, 2, 8, 33, 100])) if big else 1
    flops = float(10 ** rng.uniform(8, 10)) if big else float(rng.choice([0.0, 1e3, 5e4]))
    unit = ("vector", "cube", "aicpu")[int(rng.integers(3))] if big else "vector"
    return DeviceTask("kernel", stream, f"k{i}", unit, blocks, flops, float(10 ** rng.uniform(2, 7)), "float16",
                      start_fn=lambda: i, end_fn=ends.append)


def _workload(dev: Device, rng: np.random.Generator, ops: int) -> list:
    """Random launches on ``dev``; the ends' order (each kernel's end callback) is returned."""
    ends: list = []
    streams = [dev.default_stream] + [dev.create_stream(priority=int(rng.integers(0, 3)))
                                      for _ in range(int(rng.integers(0, 3)))]
    if len(streams) > 1 and rng.random() < 0.4:
        streams[-1].core_limit = {"vector": int(rng.integers(1, 9)), "cube": int(rng.integers(1, 9))}
    events = [dev.create_event() for _ in range(2)]
    for i in range(ops):
        s, r = streams[int(rng.integers(len(streams)))], rng.random()
        ev = events[int(rng.integers(len(events)))]
        if r < 0.8:
            dev.launch(_kernel(rng, s, ends, i))
        elif r < 0.86:
            dev.record_event(ev, s)
        elif r < 0.9 and ev.record_task is not None:
            dev.stream_wait_event(s, ev)
        elif r < 0.95:
            dev.memcpy_async(s, int(10 ** rng.uniform(2, 7)), ("h2d", "d2h", "d2d")[int(rng.integers(3))])
        elif r < 0.97:
            dev.synchronize_stream(s)
        elif r < 0.985:
            dev.event_complete(ev)
        else:
            dev.memcpy_sync(4096, "h2d", lambda: None)
    dev.synchronize_device()
    return ends


def _seen(dev: Device, ends: list) -> tuple:
    """Everything the simulation and the host's clock decided, as exact values."""
    launches = [(h.task.name, h.task.seq, h.start, h.end) for h in dev.launches]
    return (dev.timeline(), launches, dev.sim.samples, dev.host_t, dev.sim.now,
            [(t.kind, t.seq) for t in dev.sim.finished], ends)


def _device(depth: int, batch: bool, name: str = "ascend910") -> Device:
    p = load_profile(name)
    dev = Device(p.model_copy(update={"queue_depth": depth, "max_tasks_per_stream": depth}))
    dev.batch_waits = batch
    return dev


def _run(batch: bool, seed: int) -> tuple:
    rng = np.random.default_rng(seed)
    dev = _device(int(rng.integers(2, 16)), batch, ("ascend910", "ascend910b", "ascend310p")[int(rng.integers(3))])
    ends = _workload(dev, rng, int(rng.integers(20, 300)))
    return _seen(dev, ends)


@pytest.mark.parametrize("seed", range(40))
def test_random_full_queues_match_the_plain_launch(monkeypatch, seed):
    if seed % 2:   # batches cut short by their bound too
        monkeypatch.setattr(device_mod, "BATCH_MAX", 3)
    assert _run(True, seed) == _run(False, seed)


def _chain(batch: bool, flops: float, n: int = 400) -> tuple[tuple, list]:
    """A chain of one kernel on one stream of a 16-deep queue; whether each launch (and
    each look at the host's clock) ran the simulator."""
    dev = _device(16, batch)
    done = dev._sim.finished   # grows only while the simulator runs
    ends: list = []
    ran = []
    for i in range(n):
        before = len(done)
        dev.launch(DeviceTask("kernel", dev.default_stream, f"k{i}", flops=flops, start_fn=lambda: 0,
                              end_fn=ends.append))
        ran.append(len(done) > before)
    dev.synchronize_device()
    return _seen(dev, ends), ran


@pytest.mark.parametrize("flops", [1e3, 1e9])   # the device faster than the host, then slower
def test_launches_onto_a_full_queue_are_held_then_submitted_alike(flops):
    held, ran_held = _chain(True, flops)
    plain, ran_plain = _chain(False, flops)
    assert held == plain
    assert ran_plain[16:] == [True] * (400 - 16)   # the plain launch waits at every launch past the 16th
    # held: the simulator runs only when BATCH_MAX launches are held, not at each launch
    assert sum(ran_held) == (400 - 16) // device_mod.BATCH_MAX
    if flops > 1e6:   # a slow device: the host's clock still waited for each retiring task
        assert held[1][16][2] > held[1][15][3]
    else:   # a fast one: the host never waited, one launch cost apart
        assert [h[2] for h in held[1]] == [i * 3.0 for i in range(400)]


def test_a_look_at_the_device_submits_what_is_held():
    dev = _device(4, True)
    tasks = [dev.launch(DeviceTask("kernel", dev.default_stream, f"k{i}", flops=1e3)) for i in range(10)]
    assert len(dev._held) == 6 and tasks[9].enqueue_t == 0.0   # held: not yet stamped nor submitted
    assert dev.host_t == 30.0 and not dev._held                 # reading the clock submitted them
    assert tasks[9].enqueue_t == 30.0 and len(dev.launches) == 10
    for look in (lambda d: d.sim, lambda d: d.launches, lambda d: d.timeline(), lambda d: d.synchronize_device(),
                 lambda d: d.event_complete(d.create_event()), lambda d: d.create_stream()):
        for _ in range(6):
            dev.launch(DeviceTask("kernel", dev.default_stream, "k", flops=1e3))
        assert dev._held
        look(dev)
        assert not dev._held


def test_the_batch_runs_inside_the_devices_quiet_hook():
    """``Device.quiet`` (eager mode's run_quietly) wraps a batch of held launches."""
    entered = []

    class Hook:
        def __enter__(self):
            entered.append(len(dev._held))

        def __exit__(self, *exc):
            return None

    dev = _device(4, True)
    dev.quiet = Hook   # type: ignore[assignment]
    for i in range(6):   # two held: too few to pay for the hook
        dev.launch(DeviceTask("kernel", dev.default_stream, f"k{i}", flops=1e3))
    dev.synchronize_device()
    for i in range(10):
        dev.launch(DeviceTask("kernel", dev.default_stream, f"k{i}", flops=1e3))
    dev.synchronize_device()
    assert entered == [0]   # once, for the batch of six (taken off the list before it runs)
