"""A device that outlives plans: a session's signatures share one device and one copy of
the weights, plans are evicted least recently used first, and a memory error names the
pools that hold the device's memory."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import graphexec as gx
from graphexec.errors import OutOfMemoryError
from graphexec.runtime.profiles import load_profile


def _mlp():
    """x[N,3] @ w1[3,8] -> Relu -> @ w2[8,4] + b -> Sigmoid: three initializers, a free batch."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal(s).astype(np.float32), n)
             for n, s in (("w1", (3, 8)), ("w2", (8, 4)), ("b", (4,)))]
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("MatMul", ["r", "w2"], ["m"]), helper.make_node("Add", ["m", "b"], ["a"]),
             helper.make_node("Sigmoid", ["a"], ["y"])]
    g = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])], inits)
    return gx.load(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))


def _feeds(batch):
    return {"x": np.linspace(-1, 1, batch * 3, dtype=np.float32).reshape(batch, 3)}


def _numbers(result):
    return repr(replace(result.stats, compile_s=0.0, host_time_us=0.0)), result.trace


def test_signatures_share_one_device_and_one_copy_of_the_weights():
    graph = _mlp()
    s = gx.Session(graph)
    results = {b: s.run(_feeds(b)) for b in (1, 5, 7, 5, 1)}
    plans = list(s.plans._plans.values())
    assert len(plans) == 3 and len({id(p.device) for p in plans}) == 1
    weights = [e.tensor for e in plans[0].memory_plan.buffers if e.region == "weight"]
    assert sorted(weights) == ["b", "w1", "w2"]
    assert s.plans.weights.uploads == 3   # one copy each, not one per signature (9 before)
    assert len({tuple(p.weight_at[w] for w in weights) for p in plans}) == 1
    for b, r in results.items():   # each signature's run is what a session of its own gives
        alone = gx.Session(graph).run(_feeds(b))
        assert r.outputs["y"].tobytes() == alone.outputs["y"].tobytes()
        assert _numbers(r) == _numbers(alone)


def test_least_recently_used_plan_is_evicted_past_the_bound():
    graph = _mlp()
    s = gx.Session(graph, max_plans=2)
    for b in (1, 5, 1, 7):   # 5 is the least recently used when 7 comes
        s.run(_feeds(b))
    assert len(s.plans) == 2 and s.plans.evicted == 1
    assert {tuple(p.plan.options.input_types["x"].shape) for p in s.plans._plans.values()} == {(1, 3), (7, 3)}
    held = s.plans.device.memory.used
    r = s.run(_feeds(5))   # compiled and loaded again; 1 goes out now
    assert s.plans.evicted == 2 and r.outputs["y"].tobytes() == gx.Session(graph).run(_feeds(5)).outputs["y"].tobytes()
    assert s.plans.weights.uploads == 3   # the weights stayed: a plan always held them
    one = gx.Session(graph)
    one.run(_feeds(7))
    assert held > one.plans.device.memory.used   # two plans' pools, not one


def test_evicting_every_plan_frees_the_weights_too():
    s = gx.Session(_mlp(), max_plans=1)
    s.run(_feeds(2))
    first = s.plans.device.memory.used
    s.run(_feeds(3))   # loaded beside 2's plan (sharing its weights), then 2's is evicted
    assert s.plans.evicted == 1 and s.plans.weights.uploads == 3
    s.plans._evict()
    assert s.plans.device.memory.used == 0 and s.plans.weights.held_bytes == 0
    s.run(_feeds(2))   # uploaded again, into fresh bytes
    assert s.plans.weights.uploads == 6 and s.plans.device.memory.used == first


def test_a_load_that_does_not_fit_names_the_pools_holding_the_memory():
    small = load_profile("ascend910").model_copy(update={"hbm_capacity_bytes": 1 << 20})
    s = gx.Session(_mlp(), device=small)
    s.run(_feeds(2))
    with pytest.raises(OutOfMemoryError) as e:
        s.run(_feeds(30000))   # each tensor fits in 1 MiB, the plan's pools together do not
    msg = str(e.value)
    assert "the plan needs" in msg and "held on the device: plan x[2, 3]: activation pool" in msg
    assert "weights (shared) " in msg and "kept tensors and bodies' pools 0 bytes" in msg and len(s.plans) == 1


def test_memory_pressure_evicts_before_it_fails():
    graph = _mlp()
    one = gx.Session(graph)
    one.run(_feeds(20000))
    need = one.plans.device.memory.used
    tight = load_profile("ascend910").model_copy(update={"hbm_capacity_bytes": need + need // 2})
    s = gx.Session(graph, device=tight)
    s.run(_feeds(20000))
    r = s.run(_feeds(19000))   # both do not fit together: the first goes out
    assert s.plans.evicted == 1 and len(s.plans) == 1 and r.outputs["y"].shape == (19000, 4)


def test_max_plans_is_checked():
    with pytest.raises(gx.GraphExecError, match="max_plans must be an int >= 1"):
        gx.Session(_mlp(), max_plans=0)


def test_the_executor_is_load_and_run_over_a_device():
    """``load(plan, device)`` and ``run(loaded, feeds)``: two plans of one model on one
    device share its weights; a run is the session's, and a timing-only one its numbers."""
    from graphexec.engine.compiled import clone_graph, compile
    from graphexec.engine.feeds import check_feeds
    from graphexec.engine.loaded import load, run
    from graphexec.engine.weights import WeightStore
    from graphexec.plan import CompileOptions
    from graphexec.runtime.device import Device

    graph, profile = _mlp(), load_profile("ascend910")
    plans = {b: compile(clone_graph(graph), CompileOptions(input_types=check_feeds(graph, _feeds(b))), profile)
             for b in (1, 5)}
    device = Device(profile, graph_mode=True)
    store = WeightStore(device)
    loaded = {b: load(p, device, weights=store) for b, p in plans.items()}
    assert store.uploads == 3 and all(x.device is device for x in loaded.values())
    for b, x in loaded.items():
        ours, session = run(x, _feeds(b)), gx.Session(graph).run(_feeds(b))
        np.testing.assert_array_equal(ours.outputs["y"], session.outputs["y"])
        assert _numbers(ours) == _numbers(session)
        assert _numbers(run(x, _feeds(b), compute=False))[1] == session.trace
    with pytest.raises(gx.GraphExecError, match="weight store belongs to another device"):
        load(plans[1], Device(profile), weights=store)


def test_a_folded_weight_is_held_once_across_signatures():
    """x @ Transpose(W): the Transpose folds at compile time into a new array in every
    signature's plan, the same bytes under the same name; the device holds it once."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((4, 3)).astype(np.float32)
    nodes = [helper.make_node("Transpose", ["W"], ["Wt"], perm=[1, 0]), helper.make_node("MatMul", ["x", "Wt"], ["y"])]
    g = helper.make_graph(nodes, "folded", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])],
                          [numpy_helper.from_array(w, "W")])
    graph = gx.load(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
    s = gx.Session(graph)
    for b in (1, 5, 7):
        np.testing.assert_allclose(s.run(_feeds(b)).outputs["y"], _feeds(b)["x"] @ w.T, rtol=1e-6)
    plans = list(s.plans._plans.values())
    folded = [p.graph.values["Wt"].const for p in plans]
    assert len({id(c) for c in folded}) == 3 and all(p.memory_plan.by_name["Wt"].region == "weight" for p in plans)
    assert s.plans.weights.uploads == 1 and len({p.weight_at["Wt"] for p in plans}) == 1
    s.plans._evict()   # the first plan out: the copy stays for the others
    assert s.plans.weights.uploads == 1 and s.plans.weights.held_bytes > 0
    np.testing.assert_allclose(s.run(_feeds(7)).outputs["y"], _feeds(7)["x"] @ w.T, rtol=1e-6)
