"""Replayed runs, kernels computing into their output views, and Session(threads=N):
none of them may change an output bit or a simulated number."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import graphexec as gx
from dags import random_dag
from graphexec.passes import thread_plan as threads
from graphexec.passes.direct_writes import direct_tasks, producers


def _stats(r: gx.Result) -> dict:
    d = r.stats.to_dict()
    d.pop("host_time_us"), d.pop("compile_s")
    return d


def _same(a: gx.Result, b: gx.Result) -> bool:
    return all(a.outputs[k].tobytes() == b.outputs[k].tobytes() for k in a.outputs)


@pytest.fixture
def every_kernel_on_threads(monkeypatch):
    """Small test kernels would stay on the run's thread; hand all of them over."""
    monkeypatch.setattr(threads, "MIN_FLOPS", 0)
    monkeypatch.setattr(threads, "MIN_BYTES", 0)


def test_second_run_replays_the_first_simulation():
    model = random_dag(np.random.default_rng(1), 40)
    x = np.random.default_rng(2).standard_normal((8, 8)).astype(np.float32)
    s = gx.Session(model, streams=4)
    first, second = s.run({"x": x}), s.run({"x": x})
    tape = s.compiled._tape
    assert tape is not None and second.run.sim is not first.run.sim
    assert _same(first, second) and _stats(first) == _stats(second) and first.trace == second.trace
    fresh = gx.Session(model, streams=4).run({"x": 2 * x})
    again = s.run({"x": 2 * x})     # other numbers, same timeline
    assert s.compiled._tape is tape and _same(fresh, again) and _stats(fresh) == _stats(again)


def test_hazard_checked_runs_always_simulate():
    s = gx.Session(random_dag(np.random.default_rng(3), 20), streams=2, check_hazards=True)
    x = np.ones((8, 8), np.float32)
    s.run({"x": x})
    assert s.compiled._tape is None
    assert s.run({"x": x}).stats.extra["hazards"] == []


def test_outputs_go_straight_into_views_only_when_every_reader_follows():
    s = gx.Session(random_dag(np.random.default_rng(4), 30), streams=4)
    s.run({"x": np.ones((8, 8), np.float32)})
    c = s.compiled
    kernels = {t.id for t in c.tasks.tasks}
    assert c.state.direct == kernels                 # the engine's own schedules are race-free

    class Unordered:                                 # a schedule that misses every event
        def before(self, a, b):
            return False

    unread = {t.id for t in c.tasks.tasks if not any(set(t.writes) & set(u.reads) for u in c.tasks.tasks)}
    assert direct_tasks(c.graph, c.tasks, Unordered(), c.memory_plan.by_name) == unread != kernels
    racy = producers(c.graph, c.tasks, Unordered())
    assert all(racy[t.id] is None for t in c.tasks.tasks if c.tasks.deps.get(t.id))


@pytest.mark.parametrize("streams", [1, 4])
def test_threads_change_no_bit(streams, every_kernel_on_threads):
    model = random_dag(np.random.default_rng(5), 60, size=16)
    x = np.random.default_rng(6).standard_normal((16, 16)).astype(np.float32)
    one = gx.Session(model, streams=streams)
    many = gx.Session(model, streams=streams, threads=3)
    for _ in range(3):   # the first run simulates, later ones replay
        a, b = one.run({"x": x}), many.run({"x": x})
        assert _same(a, b) and _stats(a) == _stats(b) and a.trace == b.trace


def test_a_failing_kernel_on_a_worker_fails_the_run(every_kernel_on_threads):
    nodes = [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Sigmoid", ["x"], ["b"]),
             helper.make_node("MatMul", ["a", "b"], ["y"])]
    g = helper.make_graph(nodes, "bad", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", "m"])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    s = gx.Session(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), threads=2)
    with pytest.raises(gx.KernelError):
        s.run({"x": np.ones((2, 3), np.float32)})   # (2x3) @ (2x3)
    assert s.run({"x": np.ones((3, 3), np.float32)}).outputs["y"].shape == (3, 3)


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_threads_must_be_a_positive_int(bad):
    with pytest.raises(gx.GraphExecError):
        gx.Session(random_dag(np.random.default_rng(0), 3), threads=bad)
