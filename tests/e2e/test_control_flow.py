"""If, Loop and Scan run on the device: the chosen branch or the body becomes device tasks
(with switch and label-goto control tasks in the timeline), checked against onnxruntime
and onnx's reference."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper
from onnx.reference import ReferenceEvaluator

import graphexec as gx
from graphexec.plan import Plan, TaskKind

ort = pytest.importorskip("onnxruntime")
F = np.float32


def _model(nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, "cf", inputs, outputs, list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _vi(name, dtype=T.FLOAT, shape=None):
    return helper.make_tensor_value_info(name, dtype, shape)


def _ort(model, feeds):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def _kernel_names(result):
    return [e["name"] for e in result.trace["traceEvents"] if e.get("cat") == "kernel"]


def _if_model():
    """y = If(sum(x) > 0): relu(x) * 2 + w, else tanh(x) - w, with w an outer initializer."""
    then_g = helper.make_graph([helper.make_node("Relu", ["x"], ["r"], name="Relu_t"),
                                helper.make_node("Mul", ["r", "two"], ["m"], name="Mul_t"),
                                helper.make_node("Add", ["m", "w"], ["t"], name="Add_t")],
                               "then", [], [_vi("t", shape=[16, 16])])
    else_g = helper.make_graph([helper.make_node("Tanh", ["x"], ["h"], name="Tanh_e"),
                                helper.make_node("Sub", ["h", "w"], ["e"], name="Sub_e")],
                               "else", [], [_vi("e", shape=[16, 16])])
    nodes = [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0, name="sum"),
             helper.make_node("Greater", ["s", "zero"], ["c"], name="gt"),
             helper.make_node("If", ["c"], ["y"], name="If_0", then_branch=then_g, else_branch=else_g)]
    w = np.linspace(-1, 1, 256, dtype=F).reshape(16, 16)
    inits = [helper.make_tensor("zero", T.FLOAT, [], [0.0]), helper.make_tensor("two", T.FLOAT, [], [2.0]),
             onnx.numpy_helper.from_array(w, "w")]
    return _model(nodes, [_vi("x", shape=[16, 16])], [_vi("y", shape=[16, 16])], inits)


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_if_runs_only_the_chosen_branch_on_the_device(sign):
    model = _if_model()
    x = (sign * np.abs(np.random.default_rng(0).standard_normal((16, 16)))).astype(F)
    session = gx.Session(gx.load(model))
    assert [t.kind for t in session.compiled.tasks.tasks if t.op == "If"] == [TaskKind.CONTROL]
    result = session.run({"x": x})
    np.testing.assert_array_equal(result.outputs["y"], ReferenceEvaluator(model).run(None, {"x": x})[0])
    np.testing.assert_allclose(result.outputs["y"], _ort(model, {"x": x})[0], rtol=1e-6, atol=1e-6)
    names = _kernel_names(result)
    branch, other = ("then_branch", "else_branch") if sign > 0 else ("else_branch", "then_branch")
    assert any(n.startswith(f"If_0/{branch}/") for n in names), names
    assert not any(other in n for n in names)
    events = result.trace["traceEvents"]
    assert any(e.get("cat") == "control" and e["name"] == "If_0" for e in events)
    assert any(e["name"] == f"If_0/{branch}/StreamSwitch" for e in events if "name" in e)


def test_if_compiles_and_plans_both_branches_before_the_first_run():
    session = gx.Session(gx.load(_if_model()))
    compiled = session.compiled
    (ctrl,) = compiled.controls.values()
    assert [len(b.plans) for b in ctrl.bodies] == [1, 1]
    plans = [next(iter(b.plans.values())) for b in ctrl.bodies]
    assert all(p.memory_plan.buffers for p in plans)
    # outer values are read in place: the body's plan does not copy the weight w
    assert all("w" not in p.memory_plan.by_name for p in plans)
    x = np.ones((16, 16), F)
    stats = session.run({"x": x}).stats
    assert stats.peak_bytes == compiled.memory_plan.region_bytes["activation"] + sum(
        p.memory_plan.region_bytes["activation"] for p in plans)


def _loop_model(trips: int):
    """A 16-wide accumulator: acc = tanh(acc @ W + b) per iteration; the iteration count
    also goes out as a scan output."""
    rng = np.random.default_rng(1)
    w = (rng.standard_normal((16, 16)) * 0.3).astype(F)
    b = rng.standard_normal(16).astype(F)
    body = helper.make_graph(
        [helper.make_node("MatMul", ["acc", "W"], ["mm"], name="MatMul_b"),
         helper.make_node("Add", ["mm", "b"], ["pre"], name="Add_b"),
         helper.make_node("Tanh", ["pre"], ["acc_out"], name="Tanh_b"),
         helper.make_node("Identity", ["cond_in"], ["cond_out"], name="Id_c"),
         helper.make_node("Cast", ["i"], ["i_f"], to=T.FLOAT, name="Cast_i")],
        "body", [_vi("i", T.INT64, []), _vi("cond_in", T.BOOL, []), _vi("acc", shape=[4, 16])],
        [_vi("cond_out", T.BOOL, []), _vi("acc_out", shape=[4, 16]), _vi("i_f", shape=[])])
    nodes = [helper.make_node("Loop", ["M", "", "x"], ["y", "iters"], name="Loop_0", body=body)]
    inits = [onnx.numpy_helper.from_array(np.array(trips, np.int64), "M"),
             onnx.numpy_helper.from_array(w, "W"), onnx.numpy_helper.from_array(b, "b")]
    return _model(nodes, [_vi("x", shape=[4, 16])], [_vi("y", shape=[4, 16]), _vi("iters")], inits)


def test_loop_matches_onnxruntime_and_runs_its_body_once_per_trip():
    model = _loop_model(6)
    x = np.random.default_rng(2).standard_normal((4, 16)).astype(F)
    result = gx.Session(gx.load(model)).run({"x": x})
    ref = _ort(model, {"x": x})
    np.testing.assert_allclose(result.outputs["y"], ref[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(result.outputs["iters"], ref[1])
    names = _kernel_names(result)
    assert names.count("Loop_0/body/MatMul_b+Add_b+Tanh_b") == 6   # the body's MatMul, bias and Tanh: one kernel
    switches = [e for e in result.trace["traceEvents"] if e.get("name", "").startswith("Loop_0/body/LabelSwitch")]
    assert len(switches) == 6


def test_a_loops_simulated_time_grows_linearly_with_its_trip_count():
    x = np.ones((4, 16), F)
    t = {n: gx.Session(gx.load(_loop_model(n))).run({"x": x}).stats.makespan_us for n in (4, 8, 16)}
    assert t[4] < t[8] < t[16]
    assert t[16] - t[8] == pytest.approx(2 * (t[8] - t[4]), rel=1e-9)


def test_a_loop_stops_on_its_condition():
    """while (sum < 10): v = v + 1 ; the trip count comes from the data."""
    body = helper.make_graph(
        [helper.make_node("Add", ["v", "one"], ["v_out"]),
         helper.make_node("ReduceSum", ["v_out"], ["s"], keepdims=0),
         helper.make_node("Less", ["s", "ten"], ["cond_out"])],
        "body", [_vi("i", T.INT64, []), _vi("cond_in", T.BOOL, []), _vi("v", shape=[2])],
        [_vi("cond_out", T.BOOL, []), _vi("v_out", shape=[2])])
    inits = [helper.make_tensor("one", T.FLOAT, [], [1.0]), helper.make_tensor("ten", T.FLOAT, [], [10.0]),
             helper.make_tensor("c0", T.BOOL, [], [True])]
    model = _model([helper.make_node("Loop", ["", "c0", "v0"], ["v"], body=body)],
                   [_vi("v0", shape=[2])], [_vi("v", shape=[2])], inits)
    for start in ([0.0, 0.0], [4.0, 5.5], [20.0, 0.0]):
        v0 = np.array(start, F)
        ours = gx.Session(gx.load(model)).run({"v0": v0}).outputs["v"]
        np.testing.assert_array_equal(ours, _ort(model, {"v0": v0})[0])


@pytest.mark.parametrize("reverse_in,reverse_out,axis_in,axis_out", [(0, 0, 0, 0), (1, 0, 0, 0), (0, 1, 1, 0),
                                                                     (1, 1, 1, 1), (0, 0, -1, -1)])
def test_scan_cumulative_sum_matches_onnxruntime(reverse_in, reverse_out, axis_in, axis_out):
    body = helper.make_graph([helper.make_node("Add", ["s", "x"], ["s_out"]),
                              helper.make_node("Mul", ["s_out", "x"], ["y"])],
                             "body", [_vi("s", shape=[3]), _vi("x", shape=[3])],
                             [_vi("s_out", shape=[3]), _vi("y", shape=[3])])
    node = helper.make_node("Scan", ["s0", "xs"], ["s", "ys"], name="Scan_0", body=body, num_scan_inputs=1,
                            scan_input_directions=[reverse_in], scan_output_directions=[reverse_out],
                            scan_input_axes=[axis_in], scan_output_axes=[axis_out])
    xs_shape = [5, 3] if axis_in == 0 else [3, 5]
    model = _model([node], [_vi("s0", shape=[3]), _vi("xs", shape=xs_shape)], [_vi("s"), _vi("ys")])
    rng = np.random.default_rng(3)
    feeds = {"s0": rng.standard_normal(3).astype(F), "xs": rng.standard_normal(xs_shape).astype(F)}
    result = gx.Session(gx.load(model)).run(feeds)
    for ours, ref in zip(result.outputs.values(), _ort(model, feeds)):
        np.testing.assert_array_equal(ours, ref)
    assert sum(n.startswith("Scan_0/body/") for n in _kernel_names(result)) == 10


def test_nested_if_inside_a_loop_reads_the_outermost_scope():
    inner_then = helper.make_graph([helper.make_node("Add", ["v", "w"], ["a"])], "t", [], [_vi("a", shape=[2])])
    inner_else = helper.make_graph([helper.make_node("Sub", ["v", "w"], ["a2"])], "e", [], [_vi("a2", shape=[2])])
    body = helper.make_graph(
        [helper.make_node("Mod", ["i", "two"], ["r"]),
         helper.make_node("Equal", ["r", "zero"], ["even"]),
         helper.make_node("If", ["even"], ["v_out"], name="If_in", then_branch=inner_then, else_branch=inner_else),
         helper.make_node("Identity", ["cond_in"], ["cond_out"])],
        "body", [_vi("i", T.INT64, []), _vi("cond_in", T.BOOL, []), _vi("v", shape=[2])],
        [_vi("cond_out", T.BOOL, []), _vi("v_out", shape=[2])])
    inits = [helper.make_tensor("two", T.INT64, [], [2]), helper.make_tensor("zero", T.INT64, [], [0]),
             helper.make_tensor("M", T.INT64, [], [5]), onnx.numpy_helper.from_array(np.array([1.5, -2.0], F), "w")]
    model = _model([helper.make_node("Loop", ["M", "", "v0"], ["v"], name="Loop_0", body=body)],
                   [_vi("v0", shape=[2])], [_vi("v", shape=[2])], inits)
    v0 = np.array([0.25, 3.0], F)
    result = gx.Session(gx.load(model)).run({"v0": v0})
    np.testing.assert_array_equal(result.outputs["v"], _ort(model, {"v0": v0})[0])
    names = _kernel_names(result)
    assert sum(n.startswith("Loop_0/body/If_in/then_branch/") for n in names) == 3
    assert sum(n.startswith("Loop_0/body/If_in/else_branch/") for n in names) == 2


def test_a_bodys_independent_branches_get_streams_and_events_without_hazards():
    """Four independent chains inside an If: with streams=4 the body runs them on several
    streams, joined by events, and the hazard checker finds nothing."""
    nodes, outs = [], []
    for k in range(4):
        nodes += [helper.make_node("Mul", ["x", f"c{k}"], [f"m{k}"]), helper.make_node("Tanh", [f"m{k}"], [f"t{k}"])]
        outs.append(f"t{k}")
    nodes += [helper.make_node("Sum", outs, ["t"])]
    then_g = helper.make_graph(nodes, "then", [], [_vi("t", shape=[64, 64])])
    else_g = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [], [_vi("e", shape=[64, 64])])
    inits = [helper.make_tensor(f"c{k}", T.FLOAT, [], [float(k + 1)]) for k in range(4)]
    inits += [helper.make_tensor("c", T.BOOL, [], [True])]
    model = _model([helper.make_node("If", ["c"], ["y"], name="If_0", then_branch=then_g, else_branch=else_g)],
                   [_vi("x", shape=[64, 64])], [_vi("y", shape=[64, 64])], inits)
    x = np.random.default_rng(4).standard_normal((64, 64)).astype(F)
    result = gx.Session(gx.load(model), streams=4, check_hazards=True).run({"x": x})
    np.testing.assert_allclose(result.outputs["y"], _ort(model, {"x": x})[0], rtol=1e-6, atol=1e-6)
    kernel_streams = {e["tid"] for e in result.trace["traceEvents"] if e.get("cat") == "kernel"}
    assert len(kernel_streams) >= 2
    assert any(e.get("cat") == "event" for e in result.trace["traceEvents"])
    assert result.stats.extra["hazards"] == []


def test_same_inputs_same_timeline():
    model = _loop_model(5)
    x = np.random.default_rng(5).standard_normal((4, 16)).astype(F)
    a = gx.Session(gx.load(model), streams=2).run({"x": x})
    b = gx.Session(gx.load(model), streams=2).run({"x": x})
    assert a.stats.makespan_us == b.stats.makespan_us
    assert [(e["name"], e.get("ts")) for e in a.trace["traceEvents"]] == [(e["name"], e.get("ts"))
                                                                          for e in b.trace["traceEvents"]]
    np.testing.assert_array_equal(a.outputs["y"], b.outputs["y"])


@pytest.mark.parametrize("with_lens", [False, True])
def test_scan8_runs_per_batch_row_like_onnxruntime(with_lens):
    """Scan-8 carries a batch axis 0 and optional sequence lengths; rows past their length
    stay zero in the scan output."""
    body = helper.make_graph([helper.make_node("Add", ["s", "x"], ["s_out"]),
                              helper.make_node("Identity", ["s_out"], ["y"])],
                             "body", [_vi("s", shape=[2]), _vi("x", shape=[2])],
                             [_vi("s_out", shape=[2]), _vi("y", shape=[2])])
    node = helper.make_node("Scan", ["lens" if with_lens else "", "s0", "xs"], ["s", "ys"], body=body,
                            num_scan_inputs=1, directions=[1])
    inputs = [_vi("s0", shape=[3, 2]), _vi("xs", shape=[3, 4, 2])]
    if with_lens:
        inputs.insert(0, _vi("lens", T.INT64, [3]))
    model = _model([node], inputs, [_vi("s"), _vi("ys")], opset=8)
    rng = np.random.default_rng(6)
    feeds = {"s0": rng.standard_normal((3, 2)).astype(F), "xs": rng.standard_normal((3, 4, 2)).astype(F)}
    if with_lens:
        feeds["lens"] = np.array([4, 2, 3], np.int64)
    result = gx.Session(gx.load(model)).run(feeds)
    for ours, ref in zip(result.outputs.values(), _ort(model, feeds)):
        np.testing.assert_allclose(ours, ref, rtol=1e-6)


def test_bodies_are_compiled_with_the_plan_and_only_loaded_at_run_time(monkeypatch):
    """The plan holds each control task's bodies compiled (``Plan.bodies``, no device); a
    run converts and compiles nothing when the enclosing types fixed every signature."""
    import graphexec.engine.bodies as bodies
    import graphexec.engine.compiled as compiled_mod

    for model, feeds in ((_if_model(), {"x": np.ones((16, 16), F)}),
                         (_loop_model(3), {"x": np.ones((4, 16), F)})):
        session = gx.Session(gx.load(model))
        plan = session.compiled.plan
        ((task_id, body_plans),) = plan.bodies.items()
        assert [t.kind for t in plan.tasks.tasks if t.id == task_id] == [TaskKind.CONTROL]
        assert all(len(b.plans) == 1 and isinstance(next(iter(b.plans.values())), Plan) for b in body_plans)
        compiles = []
        monkeypatch.setattr(compiled_mod, "compile", lambda *a, **k: compiles.append(a))
        monkeypatch.setattr(bodies, "body_graph", lambda *a, **k: compiles.append(a))
        want = _ort(model, feeds)
        got = session.run(feeds).outputs
        monkeypatch.undo()
        assert compiles == []
        for ours, theirs in zip(got.values(), want):
            np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5)


def test_a_signature_only_a_run_shows_is_compiled_by_the_pipeline_then():
    """A loop-carried value that grows each trip: each new shape's body plan comes from
    ``compile`` at run time, and the outputs are onnxruntime's."""
    body = helper.make_graph(
        [helper.make_node("Concat", ["acc", "row"], ["acc_out"], axis=0, name="Concat_b"),
         helper.make_node("Identity", ["cond_in"], ["cond_out"], name="Id_c")],
        "grow", [_vi("i", T.INT64, []), _vi("cond_in", T.BOOL, []), _vi("acc", shape=["n", 4])],
        [_vi("cond_out", T.BOOL, []), _vi("acc_out", shape=["m", 4])])
    row = onnx.numpy_helper.from_array(np.arange(4, dtype=F)[None], "row")
    model = _model([helper.make_node("Loop", ["trips", "", "acc0"], ["acc"], body=body, name="Loop_0")],
                   [_vi("trips", T.INT64, []), _vi("acc0", shape=[1, 4])], [_vi("acc", shape=None)], [row])
    feeds = {"trips": np.array(3, np.int64), "acc0": np.ones((1, 4), F)}
    session = gx.Session(gx.load(model))
    result = session.run(feeds)
    np.testing.assert_array_equal(result.outputs["acc"], _ort(model, feeds)[0])
    (ctrl,) = session.compiled.controls.values()
    assert len(ctrl.bodies[0].plans) == 3   # acc of 1, 2 and 3 rows
