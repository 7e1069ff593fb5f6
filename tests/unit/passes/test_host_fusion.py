"""Host fusion: chains in one buffer computed by their first task, with every simulated
number unchanged and values within float32 rounding of the step-by-step reference."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import graphexec as gx
import graphexec.passes.host_fusion as fusion_module
from graphexec.passes.host_fusion import Done, FusedAffine, FusedConv

mk = helper.make_node
X = np.random.default_rng(0).standard_normal((1, 4, 6, 6)).astype(np.float32)


def _c(name, shape, seed):
    return numpy_helper.from_array(np.random.default_rng(seed).uniform(0.5, 2, shape).astype(np.float32), name)


PARAMS = [_c("w", (4, 4, 3, 3), 1), _c("cb", (4,), 2), _c("s", (4,), 3), _c("b", (4,), 4), _c("m", (4,), 5),
          _c("v", (4,), 6), _c("k", (4, 1, 1), 7), _c("a", (1, 4, 1, 1), 8), _c("row", (6,), 9), _c("one", (), 10),
          numpy_helper.from_array(np.zeros((4, 1, 1), np.float32), "zero"),
          numpy_helper.from_array(np.full((4, 1, 1), np.inf, np.float32), "inf"),
          numpy_helper.from_array(np.full((4, 1, 1), 1e30, np.float32), "huge")]
BN = mk("BatchNormalization", ["c", "s", "b", "m", "v"], ["n"], epsilon=1e-3)


def _model(nodes, opset=17):
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 6, 6])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], PARAMS)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _session(nodes, **kw):
    kw.setdefault("fusion", False)   # device fusion would make the chain one task; host fusion is for unfused ones
    session = gx.Session(_model(nodes), **kw)
    result = session.run({"x": X})
    want = ReferenceEvaluator(_model(nodes)).run(None, {"x": X})[0]
    np.testing.assert_allclose(result.outputs["y"], want, rtol=2e-5, atol=2e-5)
    return session, result


def _runners(session):
    return {t.op: type(session.compiled.state.runners[t.id]) for t in session.compiled.tasks.tasks}


def test_conv_chain_folds_into_the_filter():
    nodes = [mk("Conv", ["x", "w", "cb"], ["c"], pads=[1, 1, 1, 1]), BN, mk("Mul", ["n", "k"], ["p"]),
             mk("Add", ["p", "a"], ["q"]), mk("Relu", ["q"], ["y"])]
    session, _ = _session(nodes)
    assert session.compiled.fused == 4
    assert _runners(session) == {"Conv": FusedConv, "BatchNormalization": Done, "Mul": Done, "Add": Done,
                                 "Relu": Done}


def test_affine_chain_without_a_conv():
    nodes = [mk("Sigmoid", ["x"], ["c"]), BN, mk("Div", ["n", "one"], ["p"]), mk("Sub", ["p", "k"], ["q"]),
             mk("Relu", ["q"], ["y"])]
    session, _ = _session(nodes)
    assert session.compiled.fused == 3
    assert _runners(session)["BatchNormalization"] is FusedAffine


@pytest.mark.parametrize("nodes, why", [
    ([mk("Conv", ["x", "w"], ["c"]), mk("Relu", ["c"], ["y"])], "Relu alone gains nothing"),
    ([mk("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), mk("Mul", ["c", "row"], ["y"])], "varies along the width"),
    ([mk("Conv", ["x", "w"], ["c"]), mk("Sub", ["k", "c"], ["y"])], "c - x"),
    ([mk("Conv", ["x", "w"], ["c"]), mk("Mul", ["c", "c"], ["y"])], "not a constant"),
    ([mk("Sigmoid", ["x"], ["c"]), mk("Relu", ["c"], ["n"]), mk("Mul", ["n", "k"], ["y"])], "Relu comes first"),
    ([mk("Conv", ["x", "w"], ["c"]), mk("Div", ["c", "zero"], ["y"])], "x / 0 is not x * inf + 0"),
    ([mk("Conv", ["x", "w"], ["c"]), mk("Mul", ["c", "inf"], ["n"]), mk("Add", ["n", "k"], ["y"])], "inf"),
    ([mk("Conv", ["x", "w"], ["c"]), mk("Mul", ["c", "huge"], ["n"]), mk("Mul", ["n", "huge"], ["y"])],
     "K overflows though each step is finite"),
    ([mk("Sigmoid", ["x"], ["c"]), mk("Sub", ["c", "k"], ["n"]), mk("Mul", ["n", "a"], ["y"])],
     "a scale after a shift: x*k - c*k would lose x - c"),
])
@pytest.mark.filterwarnings("ignore::RuntimeWarning")   # the reference's x / 0 and overflow
def test_not_folded(nodes, why):
    session, _ = _session(nodes)
    assert session.compiled.fused == 0, why


def test_only_host_math_changes(monkeypatch):
    nodes = [mk("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), BN, mk("Relu", ["n"], ["r"]),
             mk("Conv", ["r", "w"], ["d"]), mk("Mul", ["d", "k"], ["e"]), mk("Add", ["e", "a"], ["y"])]
    session, fused = _session(nodes, streams=2)
    assert session.compiled.fused == 4
    monkeypatch.setattr(fusion_module, "fuse_chains", lambda graph, tasks, runners: (dict(runners), 0))
    plain = _session(nodes, streams=2)[1]
    assert fused.stats.makespan_us == plain.stats.makespan_us and fused.stats.peak_bytes == plain.stats.peak_bytes
    assert fused.trace == plain.trace
    np.testing.assert_allclose(fused.outputs["y"], plain.outputs["y"], rtol=1e-5)


def test_a_conv_the_reference_computes_still_folds_step_by_step():
    nodes = [mk("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), BN, mk("Relu", ["n"], ["y"])]
    session = gx.Session(_model(nodes), fusion=False)
    compiled = session.compile({"x": X})
    head = compiled.state.runners[0]
    head.plain.uses_fallback = True
    got = compiled.run({"x": X}).outputs["y"]
    np.testing.assert_allclose(got, ReferenceEvaluator(_model(nodes)).run(None, {"x": X})[0], rtol=2e-5, atol=2e-5)


_EDGES = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1.2e-38, 3e38, -3e38], np.float32)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(1, 7), min_size=1, max_size=4), st.sampled_from(list(_EDGES) + [0.5, -3.25, 7e-3]),
       st.sampled_from(list(_EDGES) + [1.0, -0.125]), st.booleans(), st.integers(0, 2**32 - 1))
def test_a_uniform_affine_has_the_per_channel_bits(dims, k, s, relu, seed):
    """One K and S for every channel: the one-element operands give each element the per-channel
    path's bits (edge values in x, K and S included; a NaN K or S keeps the per-channel path),
    into ``out`` and into a fresh array."""
    shape = tuple(dims) if len(dims) > 1 else (dims[0], 3)
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * 10.0 ** rng.integers(-40, 39, shape)).astype(np.float32)
    x.reshape(-1)[rng.integers(0, x.size, 3)] = rng.choice(_EDGES, 3)
    c = shape[1] if len(shape) > 1 else shape[0]
    affine = (np.full(c, k, np.float32), np.full(c, s, np.float32))
    fast, plain = FusedAffine("x", "y", affine, relu), FusedAffine("x", "y", affine, relu)
    plain.uniform = False
    assert fast.uniform == (not np.isnan(k) and not np.isnan(s))
    want = plain({"x": x})["y"]
    assert fast({"x": x})["y"].tobytes() == want.tobytes()
    out = np.empty_like(x)
    assert fast({"x": x}, out)["y"] is out and out.tobytes() == want.tobytes()


def test_affine_with_different_channels_or_signed_zeros_is_not_uniform():
    assert not FusedAffine("x", "y", (np.array([1, 2], np.float32), np.zeros(2, np.float32)), False).uniform
    assert not FusedAffine("x", "y", (np.ones(2, np.float32), np.array([0.0, -0.0], np.float32)), False).uniform
    assert FusedAffine("x", "y", (np.ones(3, np.float32), np.full(3, -0.0, np.float32)), False).uniform
