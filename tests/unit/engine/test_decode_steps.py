"""A decode step's replay: the binds of the small data-movement kernels (``kernels/binds.py``)
and a graph-fused node's members chained by their binds (``FusedRunner.chained``), against
the kernels and the plain path they stand for (bytes equal, stats equal)."""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper

import graphexec as gx
from graphexec import _switch
from graphexec.kernels import binds
from graphexec.kernels.fused import FusedRunner
from graphexec.kernels.quiet import run_quietly
from graphexec.kernels.registry import OpContext, Unsupported, lookup_def

ROOT = Path(__file__).resolve().parents[3]
RNG = np.random.default_rng(3)


def _kernel(op: str, ctx: OpContext, *args, **kw):
    d = lookup_def(op, "", ctx.opset)
    assert d is not None and d.bind is not None
    return d.fn(ctx, *args, **kw), d.bind(ctx, *args, **kw)


def _same(a, b):
    a, b = (a if isinstance(a, tuple) else (a,)), (b if isinstance(b, tuple) else (b,))
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert type(y) is np.ndarray and x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes()


X = RNG.standard_normal((2, 3, 8)).astype(np.float32)
CONST = (False, True, True, True, True)
VIEW_CASES = [   # (op, attrs, opset, extra inputs)
    ("Slice", {}, 13, [np.array([1]), np.array([7]), np.array([2]), np.array([2])]),
    ("Slice", {}, 13, [np.array([0, -1]), np.array([1, -9]), np.array([0, 2]), np.array([1, -2])]),
    ("Slice", {"starts": [1], "ends": [2], "axes": [1]}, 9, []),
    ("Split", {"axis": 2}, 13, [np.array([3, 5])]),
    ("Split", {"axis": 1}, 11, []),
    ("Expand", {}, 13, [np.array([4, 2, 1, 8])]),
    ("Transpose", {"perm": [2, 0, 1]}, 13, []),
]


@pytest.mark.parametrize("op,attrs,opset,extra", VIEW_CASES)
def test_a_view_bind_hands_back_the_kernels_views_of_the_input_as_it_is_now(op, attrs, opset, extra):
    x = X.copy()
    nout = 3 if op == "Split" and not extra else (2 if op == "Split" else 1)
    ctx = OpContext(op, attrs, opset, nout, "n", CONST[:1 + len(extra)])
    want, bound = _kernel(op, ctx, x, *extra)
    assert bound is not None
    _same(want, bound())
    x += 1   # the input's bytes change between runs; the bound views read them as they are
    _same(lookup_def(op, "", opset).fn(ctx, x, *extra), bound())


@pytest.mark.parametrize("op,attrs,opset,extra", VIEW_CASES[:2] + VIEW_CASES[5:6])
def test_a_bind_that_would_read_a_run_time_value_is_none(op, attrs, opset, extra):
    ctx = OpContext(op, attrs, opset, 1, "n", (False,) * (1 + len(extra)))
    assert _kernel(op, ctx, X, *extra)[1] is None


def test_a_view_bind_refuses_a_copy_and_a_bad_case():
    ctx = OpContext("Slice", {}, 13, 1, "n", CONST[:3])
    assert _kernel("Slice", ctx, X, np.array([0]), np.array([1]))[1] is not None
    bad = OpContext("Slice", {}, 13, 1, "n", CONST[:4])
    assert binds._view_bind(lambda ctx, x, *a: x.copy())(bad, X) is None   # a copy is not a view of x
    d = lookup_def("Slice", "", 13)
    assert d.bind(bad, X, np.array([0]), np.array([1]), np.array([5])) is None   # axis 5 of a rank-3 input


@pytest.mark.parametrize("axis,out", [(0, True), (2, True), (-1, False), (1, False)])
def test_concat_bind(axis, out):
    xs = [RNG.standard_normal((2, 3, 4)).astype(np.float32) for _ in range(3)]
    ctx = OpContext("Concat", {"axis": axis}, 13, 1, "n", (False,) * 3)
    shape = list(xs[0].shape)
    shape[axis] *= 3
    dst = np.empty(shape, np.float32) if out else None
    kw = {"out": dst} if out else {}
    want, bound = _kernel("Concat", ctx, *xs, **kw)
    got = bound()
    _same(want, got)
    assert (got is dst) == out
    mixed = OpContext("Concat", {"axis": 0}, 13, 1, "n", (False,) * 2)
    assert lookup_def("Concat", "", 13).bind(mixed, xs[0], xs[1][:, :2]) is None   # numpy's error, from the kernel


@pytest.mark.parametrize("idx", [np.array([2, -1, 0]), np.array(1), np.array([[0, 7]])])
def test_gather_bind_with_constant_indices(idx):
    ctx = OpContext("Gather", {"axis": 2}, 13, 1, "n", (False, True))
    want, bound = _kernel("Gather", ctx, X, idx)
    _same(want, bound())
    assert lookup_def("Gather", "", 13).bind(ctx, X, np.array([9])) is None   # out of range: the kernel's error


@pytest.mark.parametrize("idx", [np.array([2, -1, 0]), np.array(1), np.array([[0, 7]], np.int32)])
def test_gather_bind_with_indices_computed_at_run_time(idx):
    ctx = OpContext("Gather", {"axis": 2}, 13, 1, "n", (False, False))
    live = idx.copy()
    want, bound = _kernel("Gather", ctx, X, live)
    _same(want, bound())
    live[...] = np.where(live == 0, 3, -2)   # new indices in the same bytes: read as they are now
    _same(lookup_def("Gather", "", 13).fn(ctx, X, live), bound())
    live.reshape(-1)[0] = 8   # out of range: the kernel's Unsupported (its runner's fallback), not numpy's error
    with pytest.raises(Unsupported):
        bound()
    assert lookup_def("Gather", "", 13).bind(ctx, X, idx.astype(np.uint8)) is None
    assert lookup_def("Gather", "", 13).bind(ctx, X[0, 0], np.array(1)) is None   # a scalar result


@pytest.mark.parametrize("opset,attrs,axes", [(18, {"keepdims": 1}, np.array([-1])),
                                              (18, {"keepdims": 0}, np.array([0, 2])),
                                              (13, {"axes": [1]}, None), (18, {"keepdims": 1}, None)])
def test_reduce_mean_bind(opset, attrs, axes):
    extra = [] if axes is None else [axes]
    ctx = OpContext("ReduceMean", attrs, opset, 1, "n", (False,) + (True,) * len(extra))
    for dtype in (np.float32, np.float64):
        want, bound = _kernel("ReduceMean", ctx, X.astype(dtype), *extra)
        _same(want, bound())
    assert _kernel("ReduceMean", ctx, X.astype(np.float16), *extra)[1] is None
    assert _kernel("ReduceMean", ctx, X.astype(np.int32), *extra)[1] is None


@pytest.mark.parametrize("shape,axes,keep", [((1, 1, 64), [-1], 1), ((1, 3, 130), [1, 2], 0), ((7,), None, 1)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_reduce_mean_of_every_element_into_out(shape, axes, keep, dtype):
    """A mean of the whole input (an RMSNorm's one row) written into ``out`` (``binds._mean_all``):
    the kernel's bytes, over sums of every length class, a large offset and a NaN."""
    extra = [] if axes is None else [np.array(axes)]
    ctx = OpContext("ReduceMean", {"keepdims": keep}, 18, 1, "n", (False,) + (True,) * len(extra))
    d = lookup_def("ReduceMean", "", 18)
    for scale in (1e-3, 1.0, 1e5):
        x = (RNG.standard_normal(shape) * scale + 7).astype(dtype)
        want = d.fn(ctx, x, *extra)
        dst = np.empty(want.shape, dtype)
        bound = d.bind(ctx, x, *extra, out=dst)
        assert bound.func.__name__ == "_mean_all" and bound() is dst
        _same(want, dst)
    x.reshape(-1)[-1] = np.nan
    assert np.isnan(bound()).all()


def test_pow_bind_only_where_the_power_keeps_the_base_dtype():
    ctx = OpContext("Pow", {}, 15, 1, "n", (False, True))
    want, bound = _kernel("Pow", ctx, X, np.array(2.0, np.float32))
    _same(want, bound())
    dst = np.empty_like(X)
    bound = lookup_def("Pow", "", 15).bind(ctx, X, np.array(2.0, np.float32), out=dst)
    assert bound() is dst and dst.tobytes() == want.tobytes()
    assert _kernel("Pow", ctx, X, np.array(2.0))[1] is None   # float64 exponent: the kernel casts back
    assert _kernel("Pow", ctx, X.astype(np.int64), np.array(2))[1] is None


def _rms_norm():
    """x * 1/sqrt(mean(x^2) + eps) * w: graph fusion makes Add+Sqrt+Reciprocal+Mul+Mul one task."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 16])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 16])
    inits = [helper.make_tensor("two", TensorProto.FLOAT, [], [2.0]),
             helper.make_tensor("ax", TensorProto.INT64, [1], [-1]),
             helper.make_tensor("eps", TensorProto.FLOAT, [], [1e-6]),
             helper.make_tensor("w", TensorProto.FLOAT, [16], RNG.standard_normal(16).astype(np.float32).tolist())]
    nodes = [helper.make_node("Pow", ["x", "two"], ["sq"]), helper.make_node("ReduceMean", ["sq", "ax"], ["ms"]),
             helper.make_node("Add", ["ms", "eps"], ["a"]), helper.make_node("Sqrt", ["a"], ["s"]),
             helper.make_node("Reciprocal", ["s"], ["r"]), helper.make_node("Mul", ["x", "r"], ["xr"]),
             helper.make_node("Mul", ["xr", "w"], ["y"])]
    graph = helper.make_graph(nodes, "rms", [x], [y], inits)
    return gx.load(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]))


def _runs(graph, feeds, n=3):
    session = gx.Session(graph)
    return [session.run(feeds) for _ in range(n)], session


def _check_plain(graph, feeds, results):
    with _switch.plain():
        (plain,), _ = _runs(graph, feeds, 1)
    for r in results:
        assert {k: v.tobytes() for k, v in r.outputs.items()} == {k: v.tobytes() for k, v in plain.outputs.items()}
        assert replace(r.stats, compile_s=0.0, host_time_us=0.0) == \
            replace(plain.stats, compile_s=0.0, host_time_us=0.0)


def test_a_fused_node_runs_as_its_members_binds_chained():
    graph = _rms_norm()
    feeds = {"x": RNG.standard_normal((1, 2, 16)).astype(np.float32)}
    results, session = _runs(graph, feeds)
    steps = session.compile(feeds)._steps
    assert steps.chains and all(steps.fused[i] is not None for i in steps.chains)
    _check_plain(graph, feeds, results)
    other = {"x": RNG.standard_normal((1, 2, 16)).astype(np.float32)}   # new values through the same scratch
    _check_plain(graph, other, [session.run(other)])


def test_a_chain_whose_bind_raises_goes_plain_for_good():
    graph = _rms_norm()
    feeds = {"x": RNG.standard_normal((1, 2, 16)).astype(np.float32)}
    results, session = _runs(graph, feeds, 1)
    steps = session.compile(feeds)._steps
    (i,) = steps.chains

    def boom():
        raise FloatingPointError("a bind that raises")

    steps.starts[i] = boom
    results.append(session.run(feeds))
    assert i not in steps.chains and not steps.held[i]
    _check_plain(graph, feeds, results)


def test_chained_refuses_what_it_cannot_chain():
    graph = _rms_norm()
    session = gx.Session(graph)
    plan = session.compile({"x": np.zeros((1, 2, 16), np.float32)})
    (fused,) = [r for r in plan.plan.runners.values() if type(r) is FusedRunner]
    types = {n: plan.graph.values[n] for n in fused.node.inputs if n}
    values = {n: v.const if v.const is not None else np.zeros(v.type.shape, v.type.dtype) for n, v in types.items()}
    with run_quietly():
        assert fused.chained(values) is not None
        assert fused.chained({}) is None   # an input not given
        fused.members[1].bind = None
        assert fused.chained(values) is None   # a member with no bind


def test_the_committed_gpt2_decoder_replays_as_the_plain_path():
    path = ROOT / "models" / "gpt2_decoder.onnx"
    graph = gx.load(path)
    feeds = {"input_ids": np.array([[5]], np.int64), "position_ids": np.array([[6]], np.int64)}
    for i in range(2):
        for w in ("key", "value"):
            feeds[f"past_key_values.{i}.{w}"] = RNG.standard_normal((1, 2, 6, 8)).astype(np.float32)
    results, session = _runs(graph, feeds)
    steps = session.compile(feeds)._steps
    assert sum(r is not None and r.bind is not None for r in steps.runners) >= 20
    views = [e for e in steps.ends if isinstance(e, partial) and getattr(e.func, "__name__", "") == "__setitem__"]
    assert len(views) >= 10   # the view binds' ends: their copy into the output, checked once
    _check_plain(graph, feeds, results)


def _gelu_tanh():
    """GPT-2's GELU: 0.5 x (1 + tanh(0.79788 (x + 0.044715 x^3))); its Pow binds with no ``out``."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 16])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 16])
    consts = {"three": 3.0, "c": 0.044715, "k": 0.7978845834732056, "one": 1.0, "half": 0.5}
    inits = [helper.make_tensor(n, TensorProto.FLOAT, [], [v]) for n, v in consts.items()]
    nodes = [helper.make_node("Pow", ["x", "three"], ["p"]), helper.make_node("Mul", ["p", "c"], ["pc"]),
             helper.make_node("Add", ["x", "pc"], ["s"]), helper.make_node("Mul", ["s", "k"], ["sk"]),
             helper.make_node("Tanh", ["sk"], ["t"]), helper.make_node("Add", ["t", "one"], ["t1"]),
             helper.make_node("Mul", ["x", "t1"], ["xt"]), helper.make_node("Mul", ["xt", "half"], ["y"])]
    graph = helper.make_graph(nodes, "gelu", [x], [y], inits)
    return gx.load(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]))


def test_a_member_that_binds_without_out_is_made_to_write_its_scratch():
    graph = _gelu_tanh()
    feeds = {"x": RNG.standard_normal((1, 2, 16)).astype(np.float32)}
    results, session = _runs(graph, feeds)
    steps = session.compile(feeds)._steps
    assert any(steps.kernels[i].op.startswith("Pow+") for i in steps.chains)
    _check_plain(graph, feeds, results)


@pytest.mark.parametrize("sa,sb,dtype,out", [((3, 4), (4, 5), np.float32, True),
                                             ((2, 3, 4), (4, 5), np.float32, False),
                                             ((2, 1, 3, 4), (3, 4, 2), np.float64, True),
                                             ((3, 4), (4, 5), np.int64, True)])
def test_matmul_bind(sa, sb, dtype, out):
    a, b = (RNG.standard_normal(sa) * 4).astype(dtype), (RNG.standard_normal(sb) * 4).astype(dtype)
    want = np.matmul(a, b)
    dst = np.empty(want.shape, dtype) if out else None
    kw = {"out": dst} if out else {}
    ctx = OpContext("MatMul", {}, 13, 1, "n", (False, True))
    got, bound = _kernel("MatMul", ctx, a, b, **kw)
    got = got.copy()   # the kernel's result, before the bound call writes the same bytes again
    if out:
        dst[...] = 0
    res = bound()
    _same(got, res)
    assert (res is dst) == out
    bind = lookup_def("MatMul", "", 13).bind
    assert bind(ctx, a.astype(np.float16), b.astype(np.float16)) is None   # the kernel widens float16
    assert bind(ctx, a.reshape(-1)[:b.shape[-2]], b) is None   # a 1-d operand


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_one_product_into_out_is_np_dot_with_matmuls_bytes(dtype):
    """MatMul and Gemm binds of one matrix product into ``out`` call ``np.dot`` (``binds._dot``):
    numpy makes the same BLAS call as for the kernels' ``np.matmul``, byte for byte, over rows
    and matrices, transposed operands, a decode step's (1, 1, k) by (k, n)."""
    matmul, gemm = lookup_def("MatMul", "", 13), lookup_def("Gemm", "", 13)
    for m, k, n in [(1, 64, 64), (1, 64, 192), (1, 256, 64), (1, 7, 1), (3, 64, 100), (5, 257, 17)]:
        for lead in ((), (1,), (1, 1)):
            a = RNG.standard_normal((*lead, m, k)).astype(dtype)
            b = RNG.standard_normal((k, n)).astype(dtype)
            ctx = OpContext("MatMul", {}, 13, 1, "n", (False, True))
            dst = np.empty((*lead, m, n), dtype)
            bound = matmul.bind(ctx, a, b, out=dst)
            assert bound.func.__name__ == "_dot"
            assert bound() is dst and dst.tobytes() == matmul.fn(ctx, a, b).tobytes()
        for ta in (0, 1):
            for tb in (0, 1):
                a = RNG.standard_normal((k, m) if ta else (m, k)).astype(dtype)
                b = RNG.standard_normal((n, k) if tb else (k, n)).astype(dtype)
                c = RNG.standard_normal(n).astype(dtype)
                ctx = OpContext("Gemm", {"transA": ta, "transB": tb}, 13, 1, "n", (False, True, True))
                dst = np.empty((m, n), dtype)
                bound = gemm.bind(ctx, a, b, c, out=dst)
                assert bound.func.__name__ == "_dot"
                assert bound() is dst and dst.tobytes() == gemm.fn(ctx, a, b, c).tobytes()


@pytest.mark.parametrize("ta,tb,c,out", [(0, 0, (5,), True), (1, 0, (3, 5), False), (0, 1, None, True),
                                         (1, 1, (1, 5), True)])
def test_gemm_bind(ta, tb, c, out):
    a = RNG.standard_normal((4, 3) if ta else (3, 4)).astype(np.float32)
    b = RNG.standard_normal((5, 4) if tb else (4, 5)).astype(np.float32)
    cs = [] if c is None else [RNG.standard_normal(c).astype(np.float32)]
    ctx = OpContext("Gemm", {"transA": ta, "transB": tb}, 13, 1, "n", (False, True, True))
    dst = np.empty((3, 5), np.float32) if out else None
    kw = {"out": dst} if out else {}
    got, bound = _kernel("Gemm", ctx, a, b, *cs, **kw)
    got = got.copy()   # the kernel's result, before the bound call writes the same bytes again
    if out:
        dst[...] = 0
    res = bound()
    _same(got, res)
    assert (res is dst) == out
    scaled = OpContext("Gemm", {"alpha": 2.0}, 13, 1, "n", (False, True, True))
    assert lookup_def("Gemm", "", 13).bind(scaled, a if not ta else a.T, b if not tb else b.T) is None
