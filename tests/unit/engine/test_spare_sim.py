"""A replayed run's thrown-away simulator, made fresh again for the plan's next run
(``Simulator.renew`` through ``Device.reset_run``'s ``spare``) instead of built anew: the
same stats, traces and outputs, run for run, as the plain path (every run simulated on a
new simulator), including a run that simulates again on the renewed one."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np

import graphexec as gx
from graphexec import _switch
from graphexec.runtime.device import Device
from graphexec.runtime.sim import DeviceTask, Simulator

ROOT = Path(__file__).resolve().parents[3]


def _feeds(token: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(4)
    feeds = {"input_ids": np.array([[token]], np.int64), "position_ids": np.array([[6]], np.int64)}
    for i in range(2):
        for w in ("key", "value"):
            feeds[f"past_key_values.{i}.{w}"] = rng.standard_normal((1, 2, 6, 8)).astype(np.float32)
    return feeds


def _runs(graph: gx.Graph, spares: list | None = None) -> list[gx.Result]:
    session, results = gx.Session(graph), []
    for k in range(6):
        if k == 4:   # no tape kept: the run simulates, on the renewed simulator
            session.compile(_feeds(5))._tape = None
        results.append(session.run(_feeds(5 + k % 2)))
        if spares is not None:
            spares.append(session.compile(_feeds(5))._spare)
    return results


def test_a_renewed_simulator_runs_as_a_new_one_run_for_run():
    graph = gx.load(ROOT / "models" / "gpt2_decoder.onnx")
    spares: list = []
    fast = _runs(graph, spares)
    with _switch.plain():
        plain = _runs(graph)
    assert spares[1] is not None and spares[2] is spares[1]   # the same simulator, renewed run after run
    assert spares[4] is None and spares[5] is not None   # run 4 simulated on it, run 5 replayed
    for f, p in zip(fast, plain):
        assert {k: v.tobytes() for k, v in f.outputs.items()} == {k: v.tobytes() for k, v in p.outputs.items()}
        assert replace(f.stats, compile_s=0.0) == replace(p.stats, compile_s=0.0)
        assert f.trace == p.trace


def test_renew_refuses_a_simulator_that_ran_something():
    dev = Device()
    used = dev.sim
    dev.memcpy_sync(64, "h2d", lambda: None)
    assert used.renew() and used.now == 0.0 and not used.streams   # host copies moved only its clock
    dev.reset_run(used)
    assert dev.sim is used
    dev.launch(DeviceTask("kernel", dev.default_stream, name="k", flops=1e6))
    dev.synchronize_device()
    assert used.finished and not used.renew()
    dev.reset_run(used)
    assert dev.sim is not used and isinstance(dev.sim, Simulator) and not dev.sim.finished
