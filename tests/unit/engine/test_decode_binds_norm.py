"""The Softmax, LayerNormalization and Sigmoid binds (``kernels/binds_norm.py``) against their
kernels, byte for byte, and a SiLU (Sigmoid+Mul+Mul) that now runs as a chain of binds."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import graphexec as gx
from graphexec.kernels.registry import OpContext, lookup_def
from tests.unit.engine.test_decode_steps import _check_plain, _kernel, _runs, _same

RNG = np.random.default_rng(5)


def _both(op: str, ctx: OpContext, *args, out: bool = False, writes: bool = True):
    """The kernel's bytes, then the bound call's (run twice: its arrays made once serve every run)."""
    shape = args[0].shape
    dst = np.empty(shape, args[0].dtype) if out else None
    kw = {"out": dst} if out else {}
    got, bound = _kernel(op, ctx, *args, **kw)
    assert bound is not None
    got = got.copy()
    for _ in range(2):
        if out:
            dst[...] = 0
        res = bound()
        _same(got, res)
        assert (res is dst) == (out and writes)   # into ``out`` exactly where the kernel writes there


@pytest.mark.parametrize("shape,opset,axis", [((2, 3, 8), 13, -1), ((1, 4, 1, 17), 13, -1), ((2, 3, 8), 13, 1),
                                              ((2, 3, 8), 11, 1), ((2, 3, 8), 11, 2), ((2, 4, 64, 16), 13, -1)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("out", [False, True])
def test_softmax_bind(shape, opset, axis, dtype, out):
    x = (RNG.standard_normal(shape) * 5).astype(dtype)
    x.reshape(-1)[::7] = -np.inf   # a masked score, as attention writes it
    _both("Softmax", OpContext("Softmax", {"axis": axis}, opset, 1, "n", (False,)), x, out=out, writes=opset >= 13)


def test_softmax_bind_refuses_what_the_kernel_widens_or_refuses():
    bind = lookup_def("Softmax", "", 13).bind
    ctx = OpContext("Softmax", {"axis": -1}, 13, 1, "n", (False,))
    assert bind(ctx, np.zeros((2, 3), np.float16)) is None
    assert bind(ctx, np.zeros((0, 3), np.float32)) is None
    assert bind(OpContext("Softmax", {"axis": 4}, 13, 1, "n", (False,)), np.zeros((2, 3), np.float32)) is None


@pytest.mark.parametrize("axis,bias", [(-1, True), (-1, False), (1, True)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("out", [False, True])
def test_layer_norm_bind(axis, bias, dtype, out):
    x = (RNG.standard_normal((2, 3, 16)) * 3 + 1).astype(dtype)
    norm = x.shape[axis % 3:]
    args = [x, RNG.standard_normal(norm).astype(dtype)] + ([RNG.standard_normal(norm).astype(dtype)] if bias else [])
    ctx = OpContext("LayerNormalization", {"axis": axis, "epsilon": 1e-5}, 17, 1, "n", (False, True, True))
    _both("LayerNormalization", ctx, *args, out=out)


@pytest.mark.parametrize("shape,axis,norm", [((1, 1, 64), -1, (64,)), ((1, 1, 768), 2, (1, 768)),
                                              ((1, 3, 130), 1, (3, 130)), ((5,), 0, (5,))])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("out", [False, True])
def test_layer_norm_bind_on_one_row_is_the_kernel_bit_for_bit(shape, axis, norm, dtype, out):
    """A decode step's one row: the statistics as scalars (``_layer_norm_row``), the same bits,
    over rows of pairwise sums of every length class, large offsets (cancellation) and a NaN."""
    bind = lookup_def("LayerNormalization", "", 17).bind
    for scale in (1e-3, 1.0, 1e4):
        x = (RNG.standard_normal(shape) * scale + RNG.uniform(-50, 50)).astype(dtype)
        args = [x, RNG.standard_normal(norm).astype(dtype), RNG.standard_normal(norm).astype(dtype)]
        ctx = OpContext("LayerNormalization", {"axis": axis, "epsilon": 1e-6}, 17, 1, "n", (False, True, True))
        assert bind(ctx, *args).func.__name__ == "_layer_norm_row"
        _both("LayerNormalization", ctx, *args, out=out)
        _both("LayerNormalization", ctx, *args[:2], out=out)
    x.reshape(-1)[1 % x.size] = np.nan
    _both("LayerNormalization", ctx, *args, out=out)


def test_layer_norm_bind_refuses_mixed_dtypes_and_more_outputs():
    bind = lookup_def("LayerNormalization", "", 17).bind
    x, w = np.ones((2, 4), np.float32), np.ones(4, np.float32)
    assert bind(OpContext("LayerNormalization", {}, 17, 1, "n", (False, True)), x, w.astype(np.float64)) is None
    assert bind(OpContext("LayerNormalization", {}, 17, 3, "n", (False, True)), x, w) is None
    assert bind(OpContext("LayerNormalization", {}, 17, 1, "n", (False, True)), x.astype(np.float16), w) is None


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("out", [False, True])
def test_sigmoid_bind(dtype, out):
    x = (RNG.standard_normal((2, 3, 16)) * 30).astype(dtype)
    ctx = OpContext("Sigmoid", {}, 13, 1, "n", (False,))
    d = lookup_def("Sigmoid", "", 13)
    dst = np.zeros(x.shape, dtype) if out else None   # the kernel takes no ``out``; a chain gives its bind one
    bound = d.bind(ctx, x, out=dst)
    for _ in range(2):
        res = bound()
        _same(d.fn(ctx, x), res)
        assert (res is dst) == out
    assert lookup_def("Sigmoid", "", 13).bind(OpContext("Sigmoid", {}, 13, 1, "n", (False,)),
                                               x.astype(np.float16)) is None


def _silu():
    """Llama's MLP gate: silu(x) * u, which graph fusion makes one Sigmoid+Mul+Mul task."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 16])
    u = helper.make_tensor_value_info("u", TensorProto.FLOAT, [1, 2, 16])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 16])
    nodes = [helper.make_node("Sigmoid", ["x"], ["s"]), helper.make_node("Mul", ["x", "s"], ["xs"]),
             helper.make_node("Mul", ["xs", "u"], ["y"])]
    graph = helper.make_graph(nodes, "silu", [x, u], [y])
    return gx.load(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]))


def test_silu_runs_as_a_chain_of_binds():
    graph = _silu()
    feeds = {n: RNG.standard_normal((1, 2, 16)).astype(np.float32) for n in ("x", "u")}
    results, session = _runs(graph, feeds)
    steps = session.compile(feeds)._steps
    assert any(steps.kernels[i].op.startswith("Sigmoid+") for i in steps.chains)
    _check_plain(graph, feeds, results)
    other = {n: RNG.standard_normal((1, 2, 16)).astype(np.float32) for n in ("x", "u")}
    _check_plain(graph, other, [session.run(other)])


@pytest.mark.parametrize("src,to", [(np.int64, TensorProto.FLOAT), (np.float32, TensorProto.INT32),
                                    (np.float64, TensorProto.FLOAT16), (np.float32, TensorProto.FLOAT),
                                    (np.int32, TensorProto.BOOL)])
@pytest.mark.parametrize("out", [False, True])
def test_cast_bind(src, to, out):
    x = (RNG.standard_normal((2, 3, 8)) * 1e5).astype(src)
    if x.dtype.kind == "f":
        x.reshape(-1)[:3] = [np.nan, np.inf, -np.inf]
    ctx = OpContext("Cast", {"to": to}, 13, 1, "n", (False,))
    d = lookup_def("Cast", "", 13)
    with np.errstate(all="ignore"):
        want = d.fn(ctx, x).copy()
        dst = np.zeros(x.shape, want.dtype) if out else None
        bound = d.bind(ctx, x, out=dst)
        for _ in range(2):
            res = bound()
            _same(want, res)
            assert (res is dst) == out
    assert d.bind(OpContext("Cast", {"to": TensorProto.STRING}, 13, 1, "n", (False,)), x) is None


def test_cast_then_mul_runs_as_a_chain_of_binds():
    """Llama's Cast+Mul (an int64 position times a float frequency): chained since Cast binds."""
    p = helper.make_tensor_value_info("p", TensorProto.INT64, [1, 2, 16])
    f = helper.make_tensor_value_info("f", TensorProto.FLOAT, [1, 2, 16])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 16])
    nodes = [helper.make_node("Cast", ["p"], ["c"], to=TensorProto.FLOAT), helper.make_node("Mul", ["c", "f"], ["y"])]
    graph = gx.load(helper.make_model(helper.make_graph(nodes, "cm", [p, f], [y]),
                                      opset_imports=[helper.make_opsetid("", 18)]))
    feeds = {"p": RNG.integers(0, 1 << 30, (1, 2, 16)), "f": RNG.standard_normal((1, 2, 16)).astype(np.float32)}
    results, session = _runs(graph, feeds)
    steps = session.compile(feeds)._steps
    assert any(steps.kernels[i].op.startswith("Cast+") for i in steps.chains)
    _check_plain(graph, feeds, results)
