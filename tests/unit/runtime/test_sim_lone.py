"""The lone kernel on an idle device (``sim_loop._lone``, ``_run_alone``) against the plain
simulator, bit for bit: eager-style launches spread over the host's clock, so each kernel
wakes its stream on an idle device, and every way out of the shortcut: another timer due
with its wake or at its end, a kernel longer than the launch interval, waves and core caps,
zero-byte kernels, the host stopping at its clock mid-kernel, a start or end that raises
or launches, an event synchronize, held launches and full queues."""

from __future__ import annotations

import numpy as np
import pytest
from test_sim_fast import PLAIN, _seen
from test_sim_paths import Boom, _across

from graphexec.runtime.device import Device
from graphexec.runtime.sim import DeviceTask


def _tiny(rng: np.random.Generator, s, **kw) -> DeviceTask:
    blocks = int(rng.choice([1, 1, 2, 8, 32, 40, 300]))
    nbytes = 0.0 if rng.random() < 0.25 else float(10 ** rng.uniform(2, 6))
    flops = float(10 ** rng.uniform(2, 5)) if rng.random() < 0.85 else float(10 ** rng.uniform(6, 9))
    return DeviceTask("kernel", s, "k", ("vector", "cube")[int(rng.integers(2))], blocks, flops, nbytes,
                      "float16", **kw)


def _eager(dev: Device, rng: np.random.Generator, ops: int) -> None:
    """Launches one at a time on a few streams, with the host's own pauses, polls, syncs
    and event waits between them, and kernels whose start or end launches or raises."""
    streams = [dev.default_stream] + [dev.create_stream() for _ in range(int(rng.integers(0, 3)))]
    if len(streams) > 1 and rng.random() < 0.4:
        streams[-1].core_limit = {"vector": int(rng.integers(1, 4)), "cube": int(rng.integers(1, 4))}
    ev = dev.create_event()
    booms = set(rng.choice(ops, size=2, replace=False).tolist())

    def more(s) -> None:   # where its queue has room: a wait inside a step would stall either simulator
        if rng.random() < 0.3 and s.pending + 1 < dev._capacity:
            dev.launch(_tiny(rng, s))

    def start() -> None:
        more(streams[-1])

    def end(_: object) -> None:
        if dev._held or rng.random() < 0.5:
            more(streams[0])
        else:   # launched from the device: its stream's wake is due at this very end
            with dev.on_device():
                more(streams[-1])

    def boom() -> None:
        raise Boom

    for i in range(ops):
        s, r = streams[int(rng.integers(len(streams)))], rng.random()
        if i in booms:
            first = i == min(booms)   # one start raising, one end, each alone on the device
            dev.synchronize_device()
            dev.launch(_tiny(rng, s, start_fn=boom if first else None, end_fn=None if first else _raise))
            with pytest.raises(Boom):
                dev.synchronize_device()
        elif r < 0.75:
            dev.launch(_tiny(rng, s, start_fn=start if rng.random() < 0.1 else None,
                             end_fn=end if rng.random() < 0.1 else None))
        elif r < 0.83:
            dev.record_event(ev, s)
            if rng.random() < 0.5:
                dev.synchronize_event(ev)
        elif r < 0.9:
            dev.host_t += float(rng.uniform(0.0, 6.0))
            dev.event_complete(ev)   # the device runs up to the host's clock, maybe mid-kernel
        elif r < 0.93:
            dev.synchronize_stream(s)
        elif r < 0.95:
            dev.memcpy_async(s, int(10 ** rng.uniform(2, 5)), "d2d")
        else:
            dev.host_t += float(rng.uniform(0.0, 20.0))
    dev.synchronize_device()


def _raise(_: object) -> None:
    raise Boom


@pytest.mark.parametrize("seed", range(24))
def test_eager_launches_match_the_plain_simulator(use, seed):
    def observe(kind: str) -> tuple:
        rng = np.random.default_rng(9100 + seed)
        update = {"launch_cost_us": float(rng.choice([0.0, 1.0, 3.0])),
                  "task_overhead_us": float(rng.choice([0.0, 2.0]))}
        if rng.random() < 0.4:
            update["queue_depth"] = int(rng.integers(2, 6))
        dev = Device(PLAIN.model_copy(update=update))
        dev.batch_waits = bool(rng.random() < 0.5)
        _eager(dev, rng, int(rng.integers(30, 120)))
        return _seen(dev)
    _across(use, observe)


def test_a_wake_due_at_a_lone_kernels_end_matches(use):
    """Each kernel ends exactly when the next launch wakes its stream (1 us of overhead,
    1 us of blocks, 2 us per launch), with no bytes and with bytes, on one or two streams."""
    def observe(kind: str) -> tuple:
        dev = Device(PLAIN.model_copy(update={"launch_cost_us": 2.0, "task_overhead_us": 1.0}))
        dev.batch_waits = True
        other = dev.create_stream()
        peak = dev.profile.unit_rate("vector", "float16")
        for i in range(40):
            s = other if i % 5 == 4 else dev.default_stream
            dev.launch(DeviceTask("kernel", s, "k", "vector", 1, peak, 0.0 if i % 3 else 8.0, "float16"))
            if i % 9 == 8:
                dev.event_complete(dev.create_event())
        dev.synchronize_device()
        return _seen(dev)
    _across(use, observe)


def test_the_host_stopping_at_each_point_of_a_lone_kernel_matches(use):
    """The simulation stopped at a kernel's start, at its blocks' placement and at clocks
    before, inside and after it (conditions no device call makes, but ``run_until`` takes):
    each stop leaves the state the plain steps leave."""
    def observe(kind: str) -> tuple:
        dev = Device(PLAIN.model_copy(update={"launch_cost_us": 3.0}))
        s = dev.default_stream
        tasks = [DeviceTask("kernel", s, "k", "vector", 2, 2e4 * (1 + i % 3), 100.0 * (i % 2), "float16")
                 for i in range(12)]
        for t in tasks:
            dev.launch(t)
        sim, seen = dev.sim, []
        for i, t in enumerate(tasks):
            seen.append(sim.run_until(lambda t=t: t.start_t is not None))
            seen.append(sim.run_until(lambda t=t: t.max_cores > 0))
            sim.advance_to(sim.now + 0.25 * (i % 4))
            seen.append((sim.now, sim.cores.next_t, len(sim.cores.cohorts)))
        dev.synchronize_device()
        return _seen(dev), seen
    _across(use, observe)


def test_a_start_that_raises_beside_other_woken_streams_loses_none(use):
    """Two streams woken at one instant, the first one's kernel start raising: the fault
    surfaces at the synchronize, and the other stream's kernel still runs (its wake was
    dropped with the fault, and the next synchronize stalled)."""
    def observe(kind: str) -> tuple:
        dev = Device("ascend910", graph_mode=True)
        a, b = dev.default_stream, dev.create_stream()
        dev.launch(DeviceTask("kernel", a, "bad", "vector", 1, 1e3, 0.0, "float16", start_fn=_boom))
        dev.launch(DeviceTask("kernel", b, "ok", "vector", 1, 1e3, 0.0, "float16"))
        with pytest.raises(Boom):
            dev.synchronize_device()
        dev.synchronize_device()
        assert b.pending == 0
        return _seen(dev)
    _across(use, observe)


def _boom() -> None:
    raise Boom
