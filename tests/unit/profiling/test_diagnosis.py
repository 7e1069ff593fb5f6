"""The diagnosis is causal: each cause's gain is its counterfactual's measured speedup, the
causes come best first, and graphs built to have one bottleneck get it as the first cause."""

from __future__ import annotations

import json

import numpy as np
import pytest
from profiling_graphs import (
    big_matmuls,
    elementwise_chain,
    host_paced_chain,
    matmul_chains,
    shallow_queues,
    slow_launches,
    tiny_chain,
    wide_matmuls,
    wide_reductions,
)

import graphexec as gx
from graphexec.profiling.causes import TIE, ranked

BUILT = {   # reason -> (graph, session options)
    "memory": (elementwise_chain, {}),
    "launch": (lambda: tiny_chain(), {"launch": "host", "device": slow_launches()}),
    "dependency": (wide_reductions, {}),
    "compute": (big_matmuls, {}),
    # float32 kernels a little longer than a launch (force_fp16 would halve them)
    "host": (host_paced_chain, {"launch": "host", "device": shallow_queues(),
                                "precision_mode": "must_keep_origin_dtype"}),
}


def _run(graph, streams=1, **kw):
    session = gx.Session(graph, streams=streams, **kw)
    return session, session.run(gx.default_feeds(graph))


@pytest.mark.parametrize("reason", sorted(BUILT))
def test_built_to_order_models_get_their_cause_first_with_the_largest_gain(reason):
    make, kw = BUILT[reason]
    _, r = _run(make(), **kw)
    d = r.diagnosis
    gains = {c.reason: c.gain for c in d.causes}
    assert d.reason == d.causes[0].reason == reason, [(c.reason, round(c.gain, 3)) for c in d.causes]
    assert sorted(gains) == sorted(["dependency", "launch", "dispatch", "memory", "compute", "host"])
    # host's counterfactual lies inside launch's (graph mode never fills a queue): a tie goes to host
    assert d.causes[0].gain >= max(gains.values()) / (1 + TIE) if reason == "host" else \
        d.causes[0].gain == max(gains.values())
    assert d.causes[0].gain > 1.3
    assert f"{d.causes[0].gain:.2f}x" in d.message and d.message == d.causes[0].message


def test_a_gain_is_the_speedup_of_its_counterfactual_run_for_real():
    """The dependency gain says what more streams buy; running on them for real agrees."""
    _, r = _run(wide_reductions())
    dep = next(c for c in r.diagnosis.causes if c.reason == "dependency")
    assert r.diagnosis.what_if_speedup == dep.gain and r.diagnosis.what_if_streams > 1
    assert r.diagnosis.numbers["what_if_base_us"] == pytest.approx(r.stats.makespan_us, rel=1e-6)
    _, fast = _run(wide_reductions(), streams=r.diagnosis.what_if_streams)
    assert r.stats.makespan_us / fast.stats.makespan_us == pytest.approx(dep.gain, rel=0.05)
    # graph mode for real: the launch counterfactual of the host-launched chain
    _, host = _run(tiny_chain(), launch="host")
    _, graph = _run(tiny_chain(), launch="graph", fusion=False)   # the same tasks; fusion is another gain
    launch = next(c for c in host.diagnosis.causes if c.reason == "launch")
    assert host.stats.makespan_us / graph.stats.makespan_us == pytest.approx(launch.gain, rel=0.05)


def test_the_issue_example_what_if_speedup_is_measured_and_named():
    """16 independent chains of small MatMuls: the multi-stream what-if is always there, and
    the causes list names it with its gain whatever comes first."""
    _, r = _run(matmul_chains())
    d = r.diagnosis
    assert d.what_if_speedup is not None and d.what_if_speedup > 3 and d.what_if_streams == 8
    _, fast = _run(matmul_chains(), streams=8)   # the what-if is what 8 streams do for real
    assert r.stats.makespan_us / fast.stats.makespan_us == pytest.approx(d.what_if_speedup, rel=0.05)
    dep = next(c for c in d.causes if c.reason == "dependency")
    assert "--streams 8" in dep.message and f"{dep.gain:.2f}x" in dep.message
    assert [c.gain for c in d.causes if c.gain >= 1.05] == sorted((c.gain for c in d.causes if c.gain >= 1.05),
                                                                  reverse=True)


def test_ranked_puts_a_narrower_cause_first_only_on_a_tie():
    assert ranked({"launch": 2.0, "host": 1.99, "memory": 1.5}) == ["host", "launch", "memory"]
    assert ranked({"launch": 2.0, "host": 1.5, "memory": 1.7}) == ["launch", "memory", "host"]
    assert ranked({"memory": 2.0, "dispatch": 1.99}) == ["memory", "dispatch"]


def test_the_what_if_leaves_the_compiled_plan_as_it_was():
    graph = wide_matmuls(k=4096)
    session, r = _run(graph)
    streams = list(session.compiled.schedule.stream_of)
    assert r.diagnosis.causes
    assert list(session.compiled.schedule.stream_of) == streams
    assert session.compiled.profile.task_overhead_us == gx.Session(graph).profile.task_overhead_us
    again = session.run(gx.default_feeds(graph))
    assert again.stats.makespan_us == r.stats.makespan_us
    for k in r.outputs:
        np.testing.assert_array_equal(again.outputs[k], r.outputs[k])


def test_hta_analyses_add_up():
    # float32 kernels (a float16 one would be shorter than a launch)
    _, r = _run(host_paced_chain(), launch="host", device=shallow_queues(), precision_mode="must_keep_origin_dtype")
    a = r.diagnosis.analyses
    idle = a["idle"]["0"]
    assert idle["idle_us"] == pytest.approx(idle["host_wait_us"] + idle["kernel_wait_us"] + idle["other_us"])
    assert idle["idle_us"] == pytest.approx(r.stats.device_idle_us, rel=1e-6)   # one stream: the device's idle
    assert idle["host_wait_us"] > 0.9 * idle["idle_us"]                         # every gap waits on a launch
    cp = a["critical_path"]   # every kernel, each behind a launch that waited for the one before to finish
    assert cp["tasks"] == [f"op{i}" for i in range(20)] and cp["queue_blocks"] == 19
    launch = shallow_queues().launch_cost_us   # the path starts at the host's first launch, before the device
    assert cp["kernel_us"] + cp["launch_us"] + cp["gap_us"] == pytest.approx(r.stats.makespan_us + launch)
    _, r = _run(tiny_chain(), launch="host")   # deep queues: the host's 60 launches are the path
    cp = r.diagnosis.analyses["critical_path"]
    assert len(cp["tasks"]) == 1 and cp["launch_us"] == pytest.approx(60 * launch) and cp["queue_blocks"] == 0
    assert a["queues"]["0"]["max"] == 1 and a["queues"]["0"]["blocked_us"] > 0
    assert a["launch"]["kernels"] == 20 and a["launch"]["short_kernels"] == 0


def test_advisor_thresholds_are_in_the_numbers():
    _, r = _run(wide_reductions())
    n = r.diagnosis.numbers
    assert n["low_block_dim_ops"] == 8 and n["free_time_flagged"] == 0.0
    # float32 kernels (a float16 one would be shorter than a launch)
    _, r = _run(host_paced_chain(), launch="host", device=shallow_queues(), precision_mode="must_keep_origin_dtype")
    assert r.diagnosis.numbers["free_time_flagged"] == 1.0 and r.diagnosis.numbers["free_time_share"] > 0.1


def test_diagnosis_is_computed_once_and_serializes():
    _, r = _run(tiny_chain(n=10))
    assert r.diagnosis is r.diagnosis
    doc = json.loads(json.dumps(r.diagnosis.to_dict()))
    assert {"reason", "message", "ops", "numbers", "what_if_speedup", "what_if_streams", "causes",
            "actions"} <= set(doc)
    assert doc["causes"][0]["reason"] == doc["reason"] and set(doc["causes"][0]) == {
        "reason", "gain", "message", "ops", "numbers", "fields"}


def test_diagnosis_is_deterministic():
    a = _run(wide_reductions())[1].diagnosis
    b = _run(wide_reductions())[1].diagnosis
    assert a == b
