"""Custom kernels: registered with shape and cost rules, usable from the builder, YAML and ONNX, scheduled like any op."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import graphexec as gx
from graphexec.ir import TensorType
from graphexec.kernels.cost import node_cost
from graphexec.kernels import registry
from graphexec.kernels.custom import CUSTOM_DOMAIN, CostInput, custom_cost, lookup_custom


@gx.kernel("TestScale", shape="same", cost=lambda c: {"flops": 3 * c.out_elements, "unit": "vector"})
def scale(x, *, factor=2.0):
    return (x * np.float32(factor)).astype(x.dtype)


@gx.kernel("TestRowSum", shape=lambda x, **a: (x.shape[0],), cost=lambda c: {"flops": 1e9, "unit": "cube",
                                                                               "block_dim": 7})
def row_sum(x):
    return x.sum(axis=1)


@gx.kernel("TestSplit2", shape=lambda x: [TensorType(x.dtype, (x.shape[0], x.shape[1] // 2))] * 2)
def split2(x):
    h = x.shape[1] // 2
    return x[:, :h].copy(), x[:, h:].copy()


@gx.kernel("TestBadDtype", shape="same")
def bad_dtype(x):
    return x.astype(np.float64)


def _graph():
    b = gx.GraphBuilder("custom", opset=17)
    x = b.input("x", "float32", [4, 6])
    s = b.TestScale(b.Relu(x), factor=3.0)        # custom between ONNX ops
    lo, hi = b.TestSplit2(s, outputs=2)
    b.output(b.TestRowSum(b.Add(lo, hi)), s)
    return b.build()


def _x():
    return np.arange(24, dtype=np.float32).reshape(4, 6) - 8


def test_registered_in_its_domain_with_rules():
    spec = lookup_custom("TestScale", CUSTOM_DOMAIN)
    assert spec is not None and spec.shape == "same" and spec.fn is scale
    assert lookup_custom("TestScale", "") is None
    entry = registry.lookup_def("TestScale", CUSTOM_DOMAIN)   # one registry: function and rules in one entry
    assert entry is not None and entry.rules is spec


def test_runs_through_builder_and_session():
    g = _graph()
    assert [n.domain for n in g.nodes] == ["", CUSTOM_DOMAIN, CUSTOM_DOMAIN, "", CUSTOM_DOMAIN]
    out = gx.Session(g).run({"x": _x()}).outputs
    s = np.maximum(_x(), 0) * 3
    np.testing.assert_array_equal(out[g.outputs[1]], s)
    np.testing.assert_array_equal(out[g.outputs[0]], (s[:, :3] + s[:, 3:]).sum(axis=1))


def test_shape_rules_type_the_graph_at_compile_time():
    compiled = gx.Session(_graph()).compile({"x": _x()})
    types = {n: str(v.type) for n, v in compiled.graph.values.items()}
    assert types[compiled.graph.outputs[0]] == "float32[4]"
    assert all(t.is_static for t in (compiled.graph.values[o].type for n in compiled.graph.nodes for o in n.outputs))


def test_cost_rule_is_used_for_scheduling():
    compiled = gx.Session(_graph()).compile({"x": _x()})
    by_op = {t.op: t for t in compiled.tasks.tasks}
    assert by_op["TestScale"].flops == 3 * 24 and by_op["TestScale"].unit == "vector"
    assert (by_op["TestRowSum"].flops, by_op["TestRowSum"].unit, by_op["TestRowSum"].block_dim) == (1e9, "cube", 7)
    # no cost rule: the default vector rule
    assert by_op["TestSplit2"].unit == "vector" and by_op["TestSplit2"].flops == 24


def test_custom_cost_keeps_defaults_and_ignores_onnx_domain():
    c = CostInput([(4, 6)], [(4, 6)], 96, 96, {})
    assert custom_cost("TestScale", CUSTOM_DOMAIN, c).bytes == 192.0
    assert custom_cost("TestScale", "", c) is None
    assert node_cost("Relu", [(4, 6)], 96, [(4, 6)], 96, {}, False, "").flops == 24


def test_kernel_output_must_match_its_shape_rule():
    b = gx.GraphBuilder("bad", opset=17)
    b.output(b.TestBadDtype(b.input("x", "float32", [2])))
    with pytest.raises(gx.KernelError, match=r"^node testbaddtype \(TestBadDtype\): kernel TestBadDtype failed on "
                                             r"inputs \(2,\): output 0 is float64\[2\], its shape rule says "
                                             r"float32\[2\]$"):
        gx.Session(b.build()).run({"x": np.ones(2, np.float32)})


def test_an_exception_in_the_kernel_is_a_kernel_error():
    @gx.kernel("TestRaises", shape="same")
    def boom(x):
        return {}["missing"]

    b = gx.GraphBuilder("boom", opset=17)
    b.output(b.TestRaises(b.input("x", "float32", [2])))
    with pytest.raises(gx.KernelError, match=r"^node testraises \(TestRaises\): kernel TestRaises failed on inputs "
                                             r"\(2,\): KeyError: 'missing'$"):
        gx.Session(b.build()).run({"x": np.ones(2, np.float32)})


def test_bad_rules_are_graph_errors():
    @gx.kernel("TestBadShape", shape=lambda x: 1 / 0)
    def f(x):
        return x

    @gx.kernel("TestBadCost", shape="same", cost=lambda c: {"time": 3})
    def g(x):
        return x

    b = gx.GraphBuilder("rules", opset=17)
    x = b.input("x", "float32", [2])
    with pytest.raises(gx.GraphError, match=r"^builder 'rules': shape rule of graphexec.custom::TestBadShape failed on float32\[2\]: "
                                            r"ZeroDivisionError: division by zero$"):
        b.TestBadShape(x)
    b.output(b.TestBadCost(x))
    with pytest.raises(gx.GraphError, match=r"^cost rule of graphexec.custom::TestBadCost returned \{'time': 3\}; "
                                            r"expected keys flops, bytes, unit \(cube, vector, aicpu\), block_dim$"):
        gx.Session(b.build()).compile({"x": np.ones(2, np.float32)})


def test_onnx_domain_and_bad_names_are_refused():
    with pytest.raises(gx.GraphExecError, match="needs its own domain, not the ONNX one"):
        gx.kernel("Relu", domain="")
    with pytest.raises(gx.GraphExecError, match="must be an identifier"):
        gx.kernel("not an op")


def test_onnx_file_with_the_custom_domain_runs():
    node = helper.make_node("TestScale", ["x"], ["y"], domain=CUSTOM_DOMAIN, factor=0.5)
    g = helper.make_graph([node], "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(CUSTOM_DOMAIN, 1)])
    y = gx.Session(gx.load(model)).run({"x": np.array([2, 4, 6], np.float32)}).outputs["y"]
    np.testing.assert_array_equal(y, [1, 2, 3])
    assert onnx.checker.check_model(model) is None  # a custom domain is valid ONNX


def test_custom_domain_name():
    @gx.kernel("TestInc", shape="same", domain="my.ops")
    def inc(x):
        return x + 1

    b = gx.GraphBuilder("dom", opset=17)
    y = b.TestInc(b.input("x", "int64", [2]))
    b.output(y)
    g = b.build()
    assert g.nodes[0].domain == "my.ops" and g.opsets["my.ops"] == 1
    np.testing.assert_array_equal(gx.Session(g).run({"x": np.array([1, 2])}).outputs[y.name], [2, 3])
