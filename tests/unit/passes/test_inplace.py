"""In-place outputs: an elementwise kernel writes over the input that dies with it, never
over one somebody else still reads."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import graphexec as gx
from memory_checks import check_no_live_overlap

mk = helper.make_node
X = np.random.default_rng(0).standard_normal((1, 4, 5, 5)).astype(np.float32)


def _model(nodes, outputs=("y",), inits=()):
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 5, 5])],
                          [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs], list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _const(name, shape, seed=1):
    return numpy_helper.from_array(np.random.default_rng(seed).standard_normal(shape).astype(np.float32) + 2, name)


def _run(model, **kw):
    kw.setdefault("fusion", False)   # in place is for the elementwise tasks device fusion leaves
    session = gx.Session(model, **kw)
    result = session.run({"x": X})
    for name, want in zip(result.outputs, ReferenceEvaluator(model).run(None, {"x": X})):
        np.testing.assert_allclose(result.outputs[name], want, rtol=1e-5, atol=1e-5)
    return session, result


CONV_BN_RELU = [mk("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
                mk("BatchNormalization", ["c", "s", "b", "m", "v"], ["n"]),
                mk("Mul", ["n", "k"], ["p"]), mk("Relu", ["p"], ["y"])]
BN_PARAMS = [_const("w", (4, 4, 3, 3)), _const("s", (4,), 2), _const("b", (4,), 3), _const("m", (4,), 4),
             numpy_helper.from_array(np.full(4, 0.5, np.float32), "v"), _const("k", (4, 1, 1), 5)]


def test_a_chain_lives_in_one_buffer():
    session, result = _run(_model(CONV_BN_RELU, inits=BN_PARAMS))
    tasks = session.compiled.tasks
    assert tasks.inplace == {"n": "c", "p": "n", "y": "p"}
    assert {tasks.locate(v) for v in "cnpy"} == {("c", 0)}
    assert [e.tensor for e in session.memory_plan.buffers if e.tensor in {"c", "n", "p", "y"}] == ["c"]
    by_name = session.memory_plan.by_name   # the chain's values are listed too, in c's bytes
    assert {v: by_name[v].alias_of for v in "npy"} == {"n": "c", "p": "c", "y": "c"}
    assert {by_name[v].offset for v in "cnpy"} == {by_name["c"].offset}


@pytest.mark.parametrize("streams", [1, 2, 4])
def test_branches_across_streams_stay_safe(streams):
    nodes = [mk("Relu", ["x"], ["a"]), mk("Sigmoid", ["a"], ["b"]), mk("Tanh", ["a"], ["c"]),
             mk("Neg", ["b"], ["d"]), mk("Abs", ["c"], ["e"]), mk("Add", ["d", "e"], ["f"]), mk("Exp", ["f"], ["y"])]
    session, result = _run(_model(nodes), streams=streams, policy="chains", check_hazards=True)
    inplace = session.compiled.tasks.inplace
    assert "b" not in inplace and "c" not in inplace          # a has two readers
    assert inplace["d"] == "b" and inplace["e"] == "c" and inplace["y"] == "f"
    assert inplace["f"] in ("d", "e")
    assert result.stats.extra["hazards"] == []
    check_no_live_overlap(session, result)


@pytest.mark.parametrize("nodes, outputs, kept", [
    ([mk("Relu", ["x"], ["y"])], ("y",), "y"),                                               # a graph input
    ([mk("Relu", ["x"], ["a"]), mk("Sigmoid", ["a"], ["y"])], ("a", "y"), "y"),              # a graph output
    ([mk("Relu", ["x"], ["a"]), mk("Reshape", ["a", "sh"], ["r"]), mk("Sigmoid", ["a"], ["y"]),
      mk("Tanh", ["r"], ["z"])], ("y", "z"), "y"),                                             # read through a view
    ([mk("Relu", ["x"], ["a"]), mk("Add", ["a", "a"], ["y"])], ("y",), "y"),                  # read twice
    ([mk("Relu", ["x"], ["a"]), mk("Add", ["a", "big"], ["y"])], ("y",), "y"),                # the output is bigger
    ([mk("Relu", ["x"], ["a"]), mk("Sum", ["x", "x", "a"], ["y"])], ("y",), "y"),            # Sum's third input
    ([mk("Relu", ["x"], ["a"]), mk("MatMul", ["a", "sq"], ["y"])], ("y",), "y"),              # not elementwise
    ([mk("Neg", ["x"], ["a"]), mk("Identity", ["a"], ["v"]), mk("Sum", ["a", "x", "v"], ["y"])],
     ("y",), "y"),                                                                             # its view, read later
])
def test_no_reuse_where_it_would_be_wrong(nodes, outputs, kept):
    inits = [numpy_helper.from_array(np.array([1, 4, 25], np.int64), "sh"), _const("big", (2, 4, 5, 5)),
             _const("sq", (5, 5))]
    session, _ = _run(_model(nodes, outputs, inits))
    assert kept not in session.compiled.tasks.inplace


def test_in_place_shrinks_the_pool():
    nodes = [mk("Relu", ["x"], ["a"]), mk("Sigmoid", ["a"], ["b"]), mk("Tanh", ["b"], ["c"]),
             mk("Transpose", ["c"], ["y"])]
    session, result = _run(_model(nodes))
    assert [e.tensor for e in session.memory_plan.buffers if e.region == "activation"] == ["a"]
    assert [e.alias_of for e in session.memory_plan if e.tensor in "bc"] == ["a", "a"]
    assert result.stats.peak_bytes == 512      # a, b and c in one buffer (400 bytes, 512-aligned)


def test_long_chains_start_a_new_buffer():
    nodes = [mk("Relu", ["x"], ["v0"])] + [mk("Tanh", [f"v{i}"], [f"v{i + 1}"]) for i in range(39)] \
        + [mk("Transpose", ["v39"], ["y"])]
    session, _ = _run(_model(nodes))
    tasks = session.compiled.tasks
    assert [tasks.root(f"v{i}") for i in (0, 15, 16, 31, 32, 39)] == ["v0", "v0", "v16", "v16", "v32", "v32"]
    assert session.compiled.state.direct >= {t.id for t in tasks.tasks}   # every link computes into its bytes


def test_a_declared_shape_the_inputs_contradict_gets_its_own_bytes():
    """value_info says t is float32[1x4x5x5]; Add broadcasts it to [2x4x5x5]."""
    model = _model([mk("Neg", ["x"], ["a"]), mk("Add", ["a", "big"], ["t"]), mk("Relu", ["t"], ["y"])],
                   inits=[_const("big", (2, 4, 5, 5))])
    model.graph.value_info.append(helper.make_tensor_value_info("t", TensorProto.FLOAT, [1, 4, 5, 5]))
    session, result = _run(model)
    assert "t" not in session.compiled.tasks.inplace and result.outputs["y"].shape == (2, 4, 5, 5)


def test_no_reuse_over_a_buffer_whose_slice_is_read_too():
    """p lies in c's bytes (a no-task Concat); Sum(c, b, p) would read p after overwriting it."""
    nodes = [mk("Neg", ["x"], ["p"]), mk("Abs", ["x"], ["q"]), mk("Concat", ["p", "q"], ["c"], axis=0),
             mk("Sum", ["c", "b", "p"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [_const("b", (2, 8))])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    x = np.arange(8, dtype=np.float32).reshape(1, 8) - 3
    session = gx.Session(model, fusion=False)
    got = session.run({"x": x}).outputs["y"]
    assert session.compiled.tasks.locate("p") == ("c", 0) and "y" not in session.compiled.tasks.inplace
    np.testing.assert_allclose(got, ReferenceEvaluator(model).run(None, {"x": x})[0], rtol=1e-6)
