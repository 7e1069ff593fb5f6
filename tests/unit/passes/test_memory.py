"""The memory planner: safe reuse under any stream count, concat no-task, joint mode, OOM."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

import graphexec as gx
from dags import random_dag
from memory_checks import check_no_live_overlap


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), n=st.integers(2, 80), streams=st.sampled_from([1, 2, 4]),
       policy=st.sampled_from(["ge", "chains", "list"]))
def test_reuse_is_safe_and_exact(seed, n, streams, policy):
    rng = np.random.default_rng(seed)
    model = random_dag(rng, n)
    x = {"x": rng.standard_normal((8, 8)).astype(np.float32)}
    session = gx.Session(model, streams=streams, policy=policy)
    result = session.run(x)
    check_no_live_overlap(session, result)
    plain = gx.Session(model, streams=streams, policy=policy, memory="none").run(x)
    assert all(plain.outputs[k].tobytes() == result.outputs[k].tobytes() for k in plain.outputs)
    s = result.stats
    assert s.peak_bytes <= s.no_reuse_bytes
    assert s.lower_bound_bytes <= s.peak_bytes
    assert all(e.offset % 512 == 0 for e in session.memory_plan.buffers)


def test_single_stream_reaches_the_interval_bound():
    model = random_dag(np.random.default_rng(7), 60)
    s = gx.Session(model).run({"x": np.ones((8, 8), np.float32)}).stats
    assert s.peak_bytes == s.cut_bound_bytes


def _concat_model():
    nodes = [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Sigmoid", ["x"], ["b"]),
             helper.make_node("Concat", ["a", "b"], ["c"], axis=1), helper.make_node("Tanh", ["c"], ["y"])]
    g = helper.make_graph(nodes, "cat", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 4])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_concat_without_a_task():
    session = gx.Session(_concat_model(), streams=2, policy="chains")
    x = np.random.default_rng(0).standard_normal((1, 4, 4)).astype(np.float32)
    r = session.run({"x": x})
    ops = [e["args"]["op"] for e in r.trace["traceEvents"] if e.get("cat") == "kernel"]
    assert "Concat" not in ops
    assert session.compiled.tasks.locate("b") == ("c", 64)
    np.testing.assert_array_equal(r.outputs["y"], np.tanh(np.concatenate([np.maximum(x, 0), 1 / (1 + np.exp(-x))], 1)))


def test_joint_mode_shrinks_or_keeps_the_pool_and_reports_cost():
    model = random_dag(np.random.default_rng(11), 70)
    x = {"x": np.ones((8, 8), np.float32)}
    reuse = gx.Session(model, streams=4, policy="chains").run(x)
    session = gx.Session(model, streams=4, policy="chains", memory="joint")
    joint = session.run(x)
    assert joint.stats.peak_bytes <= reuse.stats.peak_bytes
    report = session.memory_plan.joint
    assert {"rounds", "added_dependencies", "pool_before", "pool_after", "time_before_us", "time_after_us"} <= set(report)
    assert all(reuse.outputs[k].tobytes() == joint.outputs[k].tobytes() for k in reuse.outputs)
    check_no_live_overlap(session, joint)


def test_bad_memory_mode():
    with pytest.raises(gx.GraphExecError, match="memory must be 'reuse', 'none' or 'joint', not 'lots'"):
        gx.Session(_concat_model(), memory="lots")


def test_plan_too_big_for_the_device_is_207001():
    small = gx.Session(_concat_model()).profile.model_copy(update={"hbm_capacity_bytes": 1000})
    with pytest.raises(gx.OutOfMemoryError) as e:
        gx.Session(_concat_model(), device=small).run({"x": np.ones((1, 4, 4), np.float32)})
    assert e.value.code == 207001 and "device ascend910 has 1000" in str(e.value)


def test_unaligned_concat_keeps_its_task():
    model = _concat_model()
    for vi in (*model.graph.input, *model.graph.output):
        vi.type.tensor_type.shape.dim[1].dim_value = 3 if vi.name == "x" else 6
    session = gx.Session(model)
    r = session.run({"x": np.ones((1, 3, 4), np.float32)})
    assert "Concat" in [e["args"]["op"] for e in r.trace["traceEvents"] if e.get("cat") == "kernel"]


def test_dense_conflicts_fall_back_to_per_stream_lanes(monkeypatch):
    from graphexec.passes import pool_offsets as placement

    monkeypatch.setattr(placement, "PAIR_BUDGET", 5)
    model = random_dag(np.random.default_rng(5), 60)
    x = {"x": np.ones((8, 8), np.float32)}
    session = gx.Session(model, streams=4, policy="chains")
    result = session.run(x)
    assert session.memory_plan.cut_bound_bytes is None
    check_no_live_overlap(session, result)
    plain = gx.Session(model).run(x)
    assert all(plain.outputs[k].tobytes() == result.outputs[k].tobytes() for k in plain.outputs)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), n=st.integers(2, 80), streams=st.sampled_from([1, 2, 4]))
def test_stopping_at_the_live_peak_picks_what_trying_every_heuristic_does(seed, n, streams):
    """place_hybrid stops at the first heuristic that reaches the launch-order live peak (a
    lower bound): the same offsets, pool and heuristic as running all of them; and no plan
    of any heuristic is below that bound."""
    from graphexec.passes.pool_offsets import HEURISTICS, best_fit, conflicts, live_peak, place_hybrid

    session = gx.Session(random_dag(np.random.default_rng(seed), n), streams=streams)
    plan = session.memory_plan
    items, schedule = list(plan.items), session.compiled.schedule
    clash = conflicts(items, schedule)
    runs = [(best_fit(items, clash, order), name) for name, order in HEURISTICS.items()]
    (offsets, peak), name = min(runs, key=lambda r: r[0][1])   # min keeps the first of equal peaks
    assert all(p >= live_peak(items) for (_, p), _ in runs)
    assert place_hybrid(items, schedule, clash) == ({it.name: o for it, o in zip(items, offsets)}, peak, name)
