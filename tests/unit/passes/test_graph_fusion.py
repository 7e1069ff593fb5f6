"""Graph fusion as GE/ATC does it: each pattern becomes one task priced as the fused
kernel, can be switched off by its GE rule name, and the outputs stay onnxruntime's."""

from __future__ import annotations

import json
import math

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import graphexec as gx
from graphexec.errors import GraphExecError
from graphexec.passes.fusion_switch import GRAPH_RULES, RULES, UB_RULES, parse_switches, read_switch_file
from graphexec.runtime.profiles import load_profile

mk = helper.make_node
RNG = np.random.default_rng(0)


def _c(name, shape, low=0.5, high=2.0):
    return numpy_helper.from_array(RNG.uniform(low, high, shape).astype(np.float32), name)


def _model(nodes, inputs, consts, opset=17):
    ins = [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs.items()]
    g = helper.make_graph(nodes, "g", ins, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], consts)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _run(model, feeds, **kw):
    """(session, result), the outputs checked against onnxruntime."""
    session = gx.Session(model, **kw)
    result = session.run(feeds)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    np.testing.assert_allclose(result.outputs["y"], want, rtol=1e-4, atol=1e-5)
    return session, result


def _rules(session):
    return session.compiled.graph.meta.get("fusion", {})


CONV = {"x": [1, 4, 8, 8]}
X4 = {"x": RNG.standard_normal((1, 4, 8, 8)).astype(np.float32)}
CONV_CONSTS = [_c("w", (8, 4, 3, 3)), _c("cb", (8,)), _c("s", (8,)), _c("b", (8,)), _c("m", (8,)),
               _c("v", (8,)), _c("k", (1, 8, 1, 1)), _c("a", (8, 1, 1))]
CONV_BN_RELU = [mk("Conv", ["x", "w", "cb"], ["c"], pads=[1, 1, 1, 1]),
                mk("BatchNormalization", ["c", "s", "b", "m", "v"], ["n"], epsilon=1e-3), mk("Relu", ["n"], ["y"])]


def test_conv_bn_relu_is_one_task_priced_as_the_conv_plus_one_pass_over_its_output():
    """On 910B in float32 (its cube has a float32 path), so every tensor moves 4 bytes an element;
    without its kernel model (no L2 pass), so a task's bytes are what it moves."""
    model = _model(CONV_BN_RELU, CONV, CONV_CONSTS)
    plain = load_profile("ascend910b").model_copy(update={"kernels": None})
    fp32 = {"device": plain, "precision_mode": "must_keep_origin_dtype"}
    session, result = _run(model, X4, **fp32)
    (task,) = session.compiled.tasks.tasks
    assert task.op == "Conv" and task.unit == "cube" and task.node.meta["fused_ops"] == ["Conv", "BatchNormalization",
                                                                                         "Relu"]
    m, n, k = 8 * 8, 8, 4 * 3 * 3          # output pixels, output channels, filter size
    y = 1 * 8 * 8 * 8                        # output elements
    assert task.flops == 2 * m * n * k + y   # the conv's MACs, the Relu on its output tiles
    # x, the folded filter and bias read once, y written once: no BN/Relu round trips through HBM
    assert task.bytes == 4 * (1 * 4 * 8 * 8 + 8 * 4 * 3 * 3 + 8 + y)
    assert task.block_dim == math.ceil(m / 16) * math.ceil(n / 16)
    assert _rules(session) == {"ConvBatchnormFusionPass": 1, "ConvElemwiseUbFusion": 1}
    plain, unfused = _run(model, X4, fusion=False, **fp32)
    assert [t.op for t in plain.compiled.tasks.tasks] == ["Conv", "BatchNormalization", "Relu"]
    # unfused, BN and Relu each read and write the output (and BN its 4 parameters)
    assert sum(t.bytes for t in plain.compiled.tasks.tasks) == task.bytes + 4 * (4 * y + 4 * 8)
    assert result.stats.makespan_us < unfused.stats.makespan_us
    ev = next(e for e in result.trace["traceEvents"] if e.get("cat") == "kernel")
    assert ev["name"] == task.name and ev["args"]["fused"] == task.node.meta["fused"]
    assert len(task.node.meta["fused"]) == 3
    assert ev["args"]["fusion_rules"] == ["ConvBatchnormFusionPass", "ConvElemwiseUbFusion"]


PATTERNS = {
    # rule: (nodes, inputs, constants, the fused tasks' ops, how many tasks unfused)
    "ConvScaleFusionPass": ([mk("Conv", ["x", "w"], ["c"]), mk("Mul", ["c", "k"], ["p"]), mk("Add", ["p", "a"], ["y"])],
                            CONV, CONV_CONSTS, ["Conv"], 3),
    "TbeConvDoubleInFusionPass": ([mk("Conv", ["x", "w2"], ["c"], pads=[1, 1, 1, 1]), mk("Add", ["c", "x"], ["r"]),
                                   mk("Relu", ["r"], ["y"])], CONV, [_c("w2", (4, 4, 3, 3))], ["Conv"], 3),
    "ConvElemwiseUbFusion": ([mk("Conv", ["x", "w"], ["c"]), mk("Sigmoid", ["c"], ["y"])], CONV, CONV_CONSTS,
                             ["Conv"], 2),
    "MatMulBiasAddFusionPass": ([mk("MatMul", ["h", "wm"], ["t"]), mk("Add", ["t", "bm"], ["y"])],
                                {"h": [2, 5, 16]}, [_c("wm", (16, 32)), _c("bm", (32,))], ["MatMul"], 2),
    "ATbeMatmulElemwiseFusionPass": ([mk("Gemm", ["h2", "wm", "bm"], ["t"]), mk("Relu", ["t"], ["y"])],
                                     {"h2": [4, 16]}, [_c("wm", (16, 32)), _c("bm", (32,))], ["Gemm"], 2),
    "TbeEltwiseFusionPass": ([mk("Mul", ["e", "e"], ["e1"]), mk("Add", ["e1", "one"], ["e2"]),
                              mk("Sqrt", ["e2"], ["y"])],
                             {"e": [3, 64]}, [_c("one", ())], ["Mul+Add+Sqrt"], 3),
    "TbeReduceElemwiseFusionPass": ([mk("Mul", ["q", "scale"], ["s1"]), mk("Add", ["s1", "mask"], ["s2"]),
                                     mk("Softmax", ["s2"], ["y"], axis=-1)],
                                    {"q": [2, 4, 8, 8], "mask": [2, 1, 1, 8]}, [_c("scale", ())], ["Softmax"], 3),
}
LN = [mk("ReduceMean", ["z"], ["mu"], axes=[-1]), mk("Sub", ["z", "mu"], ["d"]), mk("Pow", ["d", "two"], ["d2"]),
      mk("ReduceMean", ["d2"], ["var"], axes=[-1]), mk("Add", ["var", "eps"], ["ve"]), mk("Sqrt", ["ve"], ["sd"]),
      mk("Div", ["d", "sd"], ["nz"]), mk("Mul", ["nz", "gamma"], ["g"]), mk("Add", ["g", "beta"], ["y"])]
PATTERNS["LayerNormONNXFusionPass"] = (LN, {"z": [2, 5, 16]}, [
    numpy_helper.from_array(np.float32(2.0), "two"), numpy_helper.from_array(np.float32(1e-5), "eps"),
    _c("gamma", (16,)), _c("beta", (16,))], ["LayerNormalization"], 9)
GELU = [mk("Div", ["u", "sqrt2"], ["g1"]), mk("Erf", ["g1"], ["g2"]), mk("Add", ["g2", "one"], ["g3"]),
        mk("Mul", ["u", "g3"], ["g4"]), mk("Mul", ["g4", "half"], ["y"])]
PATTERNS["GeluONNXFusionPass"] = (GELU, {"u": [2, 5, 16]}, [
    numpy_helper.from_array(np.float32(np.sqrt(2.0)), "sqrt2"), numpy_helper.from_array(np.float32(1.0), "one"),
    numpy_helper.from_array(np.float32(0.5), "half")], ["Gelu"], 5)


def _feeds(inputs):
    return {n: RNG.standard_normal(s).astype(np.float32) for n, s in inputs.items()}


@pytest.mark.parametrize("rule", sorted(PATTERNS))
def test_each_pattern_fuses_and_switches_off(rule, tmp_path):
    nodes, inputs, consts, fused_ops, unfused = PATTERNS[rule]
    model, feeds = _model(nodes, inputs, consts), _feeds(inputs)
    session, _ = _run(model, feeds)
    assert [t.op for t in session.compiled.tasks.tasks] == fused_ops
    assert rule in _rules(session)
    switch = tmp_path / "fusion_switch.cfg"
    switch.write_text(f"{rule}:off\n")
    off, _ = _run(model, feeds, fusion_switch_file=str(switch))
    assert rule not in _rules(off)
    plain, _ = _run(model, feeds, fusion=False)
    assert len(plain.compiled.tasks.tasks) == unfused and not _rules(plain)


@pytest.mark.parametrize("rule", sorted(PATTERNS))
def test_head_ops_offer_each_rule_every_group_it_finds(rule):
    """A rule is offered only nodes of its head ops (``fusion_patterns.HEADS``); the plain
    switch offers it every node: the same groups either way."""
    from graphexec import _switch
    from graphexec.passes.fusion_patterns import HEADS, RULE_MATCHERS

    assert [r for r, _, _ in RULE_MATCHERS] == list(HEADS)
    nodes, inputs, consts, _, _ = PATTERNS[rule]
    model = _model(nodes, inputs, consts)
    fast = gx.Session(model).compile(None).tasks.tasks
    with _switch.plain():
        plain = gx.Session(model).compile(None).tasks.tasks
    assert [(t.op, t.name) for t in fast] == [(t.op, t.name) for t in plain]


def test_gelu_then_matmul_epilogue_and_long_chains(tmp_path):
    """MatMul + bias + the exported GELU is one cube task; a chain of 8 elementwise ops is
    6 + 2 (TbeEltwiseFusionPass fuses at most 6), or 8 by AutomaticUbFusion (at most 28)
    where TbeEltwiseFusionPass is off."""
    nodes = [mk("MatMul", ["h", "wm"], ["t"]), mk("Add", ["t", "bm"], ["u"])] + GELU
    consts = [_c("wm", (16, 32)), _c("bm", (32,))] + PATTERNS["GeluONNXFusionPass"][2]
    session, _ = _run(_model(nodes, {"h": [2, 5, 16]}, consts), _feeds({"h": [2, 5, 16]}))
    (task,) = session.compiled.tasks.tasks
    assert task.unit == "cube" and task.node.meta["fused_ops"] == ["MatMul", "Add", "Div", "Erf", "Add", "Mul", "Mul"]
    chain = [mk("Abs" if i % 2 else "Neg", [f"v{i}"], [f"v{i + 1}" if i < 7 else "y"]) for i in range(8)]
    model, feeds = _model(chain, {"v0": [64]}, []), _feeds({"v0": [64]})
    session, _ = _run(model, feeds)
    assert [len(t.node.meta["members"]) for t in session.compiled.tasks.tasks] == [6, 2]
    assert _rules(session) == {"TbeEltwiseFusionPass": 2}
    (tmp_path / "s.cfg").write_text("TbeEltwiseFusionPass:off")
    session, _ = _run(model, feeds, fusion_switch_file=str(tmp_path / "s.cfg"))
    assert [len(t.node.meta["members"]) for t in session.compiled.tasks.tasks] == [8]
    assert _rules(session) == {"AutomaticUbFusion": 1}


def test_a_value_read_outside_the_group_or_a_graph_output_is_not_hidden():
    nodes = [mk("Conv", ["x", "w"], ["c"]), mk("Relu", ["c"], ["y"]), mk("Sigmoid", ["c"], ["z"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])],
                          [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("y", "z")], CONV_CONSTS)
    session, _ = _run(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), X4)
    assert len(session.compiled.tasks.tasks) == 3


def test_host_launch_and_manual_schedules_do_not_fuse():
    model = _model(CONV_BN_RELU, CONV, CONV_CONSTS)
    session, _ = _run(model, X4, launch="host")
    assert len(session.compiled.tasks.tasks) == 3


def test_switch_file_shapes():
    js = {"Switch": {"GraphFusion": {"ALL": "off", "GeluONNXFusionPass": "on"},
                     "UBFusion": {"TbeEltwiseFusionPass": "off"}}}
    assert parse_switches(json.dumps(js)) == (set(GRAPH_RULES) - {"GeluONNXFusionPass"}) | {"TbeEltwiseFusionPass"}
    assert parse_switches('{"Switch": {"UBFusion": {"ALL": "off"}}}') == set(UB_RULES)
    assert parse_switches("RequantFusionPass:off\nConvBatchnormFusionPass:off\n# note\n") == {
        "RequantFusionPass", "ConvBatchnormFusionPass"}
    assert parse_switches("ALL:off") == set(RULES)
    for bad in ("ConvBatchnormFusionPass=off", "X:maybe", '{"Switch": {"Other": {}}}', "{nope"):
        with pytest.raises(GraphExecError):
            parse_switches(bad)
    with pytest.raises(GraphExecError, match="cannot read"):
        read_switch_file("/nonexistent/fusion_switch.cfg")


def test_switching_every_rule_off_is_the_unfused_graph(tmp_path):
    model = _model(CONV_BN_RELU, CONV, CONV_CONSTS)
    switch = tmp_path / "all_off.json"
    switch.write_text(json.dumps({"Switch": {"GraphFusion": {"ALL": "off"}, "UBFusion": {"ALL": "off"}}}))
    session, _ = _run(model, X4, fusion_switch_file=str(switch))
    assert len(session.compiled.tasks.tasks) == 3


def test_compare_and_the_cli_take_the_fusion_flags(tmp_path, capsys):
    from graphexec.cli import main

    model = _model(CONV_BN_RELU, CONV, CONV_CONSTS)
    cmp = gx.compare(model, streams=[1], feeds=X4, fusion=False)
    assert cmp.sessions[0].compiled.tasks.tasks[0].op == "Conv" and len(cmp.sessions[0].compiled.tasks.tasks) == 3
    path = tmp_path / "m.onnx"
    path.write_bytes(model.SerializeToString())
    assert main(["compare", str(path), "--streams", "1", "--fusion", "off", "--json"]) == 0
    assert main(["plan", str(path)]) == 0
    assert "fusion: ConvBatchnormFusionPass x1, ConvElemwiseUbFusion x1" in capsys.readouterr().out
    assert main(["compare", str(path), "--devices", "1,2", "--fusion", "off"]) == 2
    assert "not taken with --devices" in capsys.readouterr().err
