"""A fused node's per-element tail run a block of channels at a time (``fused_chain.py``)
against the member-by-member run it replaces: the same bytes."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import graphexec as gx
from graphexec import _switch
from graphexec.engine.steps import Steps
from graphexec.kernels import fused_chain

RNG = np.random.default_rng(3)
C, H, W = 12, 40, 40   # 1600 elements a channel: blocks of 20 channels, so 1 block; see _small_blocks


def _const(name, a):
    return numpy_helper.from_array(np.asarray(a, np.float32), name)


def _graph(nodes, inits, out_shape=(1, C, H, W)):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, C, H, W])
    r = helper.make_tensor_value_info("r", TensorProto.FLOAT, list(out_shape))
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, list(out_shape))
    g = helper.make_graph(nodes, "chain", [x, r], [y], inits)
    return gx.load(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]))


def _conv_sum_relu():
    w = RNG.standard_normal((C, C, 3, 3)) * 0.2
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Sum", ["c", "r"], ["s"]), helper.make_node("Relu", ["s"], ["y"])]
    return _graph(nodes, [_const("w", w), _const("b", RNG.standard_normal(C))])


def _bn_affine_relu():
    bn = [_const(n, v) for n, v in (("sc", RNG.random(C) + 0.5), ("bb", RNG.standard_normal(C)),
                                     ("mu", RNG.standard_normal(C)), ("var", RNG.random(C) + 0.1))]
    nodes = [helper.make_node("BatchNormalization", ["x", "sc", "bb", "mu", "var"], ["n"], epsilon=1e-5),
             helper.make_node("Mul", ["n", "k"], ["m"]), helper.make_node("Sub", ["t", "m"], ["a"]),
             helper.make_node("Div", ["a", "d"], ["q"]), helper.make_node("Add", ["q", "r"], ["p"]),
             helper.make_node("Relu", ["p"], ["y"])]
    return _graph(nodes, bn + [_const("k", [[[1.5]]]), _const("t", RNG.standard_normal((C, 1, 1))),
                               _const("d", RNG.random((1, C, 1, 1)) + 0.5)])


def _hard_swish():
    """x * clip(x + 3, 0, 6) / 6 * k + s, as Paddle2ONNX writes PP-LCNet's: x read twice."""
    nodes = [helper.make_node("Add", ["x", "three"], ["a"]), helper.make_node("Clip", ["a", "zero", "six"], ["c"]),
             helper.make_node("Mul", ["x", "c"], ["m"]), helper.make_node("Div", ["m", "six"], ["d"]),
             helper.make_node("Mul", ["d", "k"], ["e"]), helper.make_node("Add", ["e", "r"], ["y"])]
    return _graph(nodes, [_const("three", 3.0), _const("zero", 0.0), _const("six", 6.0),
                          _const("k", RNG.standard_normal((C, 1, 1)))])


def _run(graph, feeds, plain_steps, monkeypatch):
    with monkeypatch.context() as m:
        if plain_steps:   # every fused node's members one after another, as before the chains
            m.setattr(fused_chain, "bind", lambda *a: None)
        session = gx.Session(graph, fusion=True)
        res = [session.run(f).outputs["y"] for f in feeds]
    return res, session


@pytest.mark.parametrize("make", [_conv_sum_relu, _bn_affine_relu, _hard_swish])
@pytest.mark.parametrize("block", [fused_chain.BLOCK_ELEMS, 3 * H * W, 1])
def test_chain_gives_the_member_by_member_bytes(make, block, monkeypatch):
    monkeypatch.setattr(fused_chain, "BLOCK_ELEMS", block)   # one block, blocks of 3 channels, one channel each
    graph = make()
    feeds = [{"x": RNG.standard_normal((1, C, H, W)).astype(np.float32),
              "r": RNG.standard_normal((1, C, H, W)).astype(np.float32)} for _ in range(2)]
    feeds[1]["x"][0, 0, 0, :3] = [np.nan, np.inf, -np.inf]
    got, session = _run(graph, feeds, False, monkeypatch)
    ref, _ = _run(graph, feeds, True, monkeypatch)
    for a, b in zip(got, ref):
        assert a.tobytes() == b.tobytes()
    steps: Steps = session.compiled._steps
    chains = [s for s in steps.starts if getattr(s, "func", None) is fused_chain._run]
    assert len(chains) == 1   # the group did run as a chain


def test_the_plain_switch_keeps_the_member_by_member_run(monkeypatch):
    monkeypatch.setattr(_switch, "FAST", False)
    graph = _conv_sum_relu()
    session = gx.Session(graph, fusion=True)
    feeds = {"x": RNG.standard_normal((1, C, H, W)).astype(np.float32),
             "r": RNG.standard_normal((1, C, H, W)).astype(np.float32)}
    session.run(feeds)
    monkeypatch.setattr(_switch, "FAST", True)
    ref, _ = _run(graph, [feeds], True, monkeypatch)
    assert session.run(feeds).outputs["y"].tobytes() == ref[0].tobytes()


def test_a_channel_past_the_cached_constants_gets_a_scalar_zero(monkeypatch):
    from graphexec.kernels import scratch
    monkeypatch.setattr(scratch, "MAX_CONSTANT", 16)   # every Relu block bigger than the cached zeros
    graph = _conv_sum_relu()
    feeds = [{"x": RNG.standard_normal((1, C, H, W)).astype(np.float32),
              "r": RNG.standard_normal((1, C, H, W)).astype(np.float32)}]
    got, _ = _run(graph, feeds, False, monkeypatch)
    ref, _ = _run(graph, feeds, True, monkeypatch)
    assert got[0].tobytes() == ref[0].tobytes()
