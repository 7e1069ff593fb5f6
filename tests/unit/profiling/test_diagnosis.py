"""The diagnosis names the right reason for graphs built to have it, and measures the what-if."""

from __future__ import annotations

import json

import numpy as np
import pytest
from profiling_graphs import elementwise_chain, tiny_chain, wide_matmuls

import graphexec as gx
from graphexec.profiling.diagnosis import choose


def _run(graph, streams=1, launch="graph"):
    session = gx.Session(graph, streams=streams, launch=launch)
    return session, session.run(gx.default_feeds(graph))


def test_chain_of_large_elementwise_ops_is_memory_bound():
    _, r = _run(elementwise_chain())
    d = r.diagnosis
    assert d.reason == "memory", d.message
    assert d.numbers["memory_bound_share"] == pytest.approx(1.0)
    assert d.numbers["hbm_utilization"] > 0.5 and d.what_if_speedup is None
    assert {o["name"] for o in d.ops} <= {f"ew{i}" for i in range(6)} and len(d.ops) == 5
    assert [o["us"] for o in d.ops] == sorted((o["us"] for o in d.ops), reverse=True)
    assert "HBM" in d.message


def test_long_chain_of_tiny_ops_is_launch_bound():
    _, r = _run(tiny_chain(), launch="host")  # launched op by op, the device waits on the host
    d = r.diagnosis
    assert d.reason == "launch", d.message
    assert d.numbers["overhead_bound_kernels"] == d.numbers["kernels"] == 60
    assert d.numbers["host_wait_us"] > 0.2 * d.numbers["makespan_us"]
    assert d.numbers["host_wait_us"] == r.stats.host_wait_us
    assert "on the host" in d.message


def test_wide_independent_matmuls_on_one_stream_are_dependency_bound():
    session, r = _run(wide_matmuls(k=32768))
    d = r.diagnosis
    assert d.reason == "dependency", d.message
    assert d.what_if_speedup > 1.2 and d.what_if_streams > 1
    assert d.numbers["what_if_base_us"] == pytest.approx(r.stats.makespan_us, rel=1e-6)
    assert {o["name"] for o in d.ops} <= {f"mm{i}" for i in range(8)} and {o["op"] for o in d.ops} == {"MatMul"}
    # the what-if is honest: running with that many streams for real is as fast as it said
    _, fast = _run(wide_matmuls(k=32768), streams=d.what_if_streams)
    assert fast.stats.makespan_us == pytest.approx(d.numbers["what_if_best_us"], rel=0.05)


def test_the_what_if_leaves_the_compiled_plan_as_it_was():
    graph = wide_matmuls(k=4096)
    session, r = _run(graph)
    streams = list(session.compiled.schedule.stream_of)
    assert r.diagnosis.what_if_speedup is not None or r.diagnosis.reason != "dependency"
    assert list(session.compiled.schedule.stream_of) == streams
    again = session.run(gx.default_feeds(graph))
    assert again.stats.makespan_us == r.stats.makespan_us
    for k in r.outputs:
        np.testing.assert_array_equal(again.outputs[k], r.outputs[k])


def test_diagnosis_is_computed_once_and_serializes():
    _, r = _run(tiny_chain(n=10))
    assert r.diagnosis is r.diagnosis
    doc = json.loads(json.dumps(r.diagnosis.to_dict()))
    assert set(doc) == {"reason", "message", "ops", "numbers", "what_if_speedup", "what_if_streams"}


def test_diagnosis_is_deterministic():
    a = _run(wide_matmuls(k=32768))[1].diagnosis
    b = _run(wide_matmuls(k=32768))[1].diagnosis
    assert a == b


def _numbers(**kw):
    base = {"cube_utilization": 0.1, "vector_utilization": 0.0, "makespan_us": 100.0, "memory_us": 0.0,
            "launch_us": 0.0, "dependency_us": 0.0}
    return base | kw


@pytest.mark.parametrize("kw, reason", [
    ({"cube_utilization": 0.7, "memory_us": 90.0}, "compute"),     # the cube is busy: nothing else matters
    ({"memory_us": 60.0, "launch_us": 30.0}, "memory"),
    ({"launch_us": 50.0, "dependency_us": 40.0}, "launch"),
    ({"dependency_us": 30.0, "memory_us": 20.0}, "dependency"),
    ({"memory_us": 5.0, "launch_us": 5.0, "dependency_us": 5.0}, "compute"),   # no reason costs a tenth
])
def test_choose(kw, reason):
    assert choose(_numbers(**kw)) == reason
