"""Shape rules of the float com.microsoft ops (kernels/contrib_shapes.py): their outputs and
everything downstream are static at compile time. That each rule agrees with its kernel's
output is checked on every case of test_contrib_ops.py / test_contrib_attention.py
(``contrib_oracle.check_inferred``)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from contrib_oracle import one_node, rand
from onnx import TensorProto, helper, numpy_helper

import graphexec as gx
from graphexec.ir import TensorType
from graphexec.kernels import contrib_shapes
from graphexec.kernels.custom import CostInput, custom_cost, lookup_custom

MS = "com.microsoft"
B, S, D, N = 2, 8, 16, 2


def _bert_layer() -> onnx.ModelProto:
    """ORT's fused BERT layer: EmbedLayerNormalization, Attention, SkipLayerNormalization,
    BiasGelu, then a plain MatMul whose type onnx infers only from the contrib outputs."""
    w = {"word": rand(30, D), "pos": rand(S, D), "seg": rand(2, D), "gamma": rand(D), "beta": rand(D),
         "qkv": rand(D, 3 * D), "qkv_b": rand(3 * D), "ffn": rand(D, D), "ffn_b": rand(D), "out": rand(D, 4)}
    nodes = [
        helper.make_node("EmbedLayerNormalization", ["ids", "segs", "word", "pos", "seg", "gamma", "beta", "mask"],
                         ["emb", "mask_index", ""], domain=MS, epsilon=1e-5),
        helper.make_node("Attention", ["emb", "qkv", "qkv_b", "mask_index"], ["att"], domain=MS, num_heads=N),
        helper.make_node("SkipLayerNormalization", ["att", "emb", "gamma", "beta"], ["ln", "", "", "sum"],
                         domain=MS),
        helper.make_node("BiasGelu", ["ln", "ffn_b"], ["act"], domain=MS),
        helper.make_node("MatMul", ["act", "out"], ["y"]),
    ]
    ints = [helper.make_tensor_value_info(n, TensorProto.INT32, ["batch", "seq"]) for n in ("ids", "segs", "mask")]
    graph = helper.make_graph(nodes, "bert", ints, [helper.make_value_info("y", onnx.TypeProto())],
                              [numpy_helper.from_array(v, k) for k, v in w.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)])


def _feeds() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {"ids": rng.integers(0, 30, (B, S)).astype(np.int32), "segs": np.zeros((B, S), np.int32),
            "mask": np.ones((B, S), np.int32)}


def test_fused_bert_layer_is_static_downstream_of_the_contrib_ops():
    session = gx.Session(gx.load(_bert_layer()))
    compiled = session.compile(_feeds())
    types = {n: v.type for n, v in compiled.graph.values.items() if v.const is None}
    assert all(t.is_static for t in types.values()), {n: str(t) for n, t in types.items() if not t.is_static}
    assert str(types["mask_index"]) == "int32[2]" and str(types["y"]) == "float32[2x8x4]"
    by_op = {t.op: t for t in compiled.tasks.tasks}
    assert by_op["MatMul"].unit == "cube" and by_op["MatMul"].flops == 2 * B * S * D * 4
    assert by_op["Attention"].unit == "cube"
    assert compiled.memory_plan is not None
    out = session.run(_feeds()).outputs["y"]
    assert out.shape == (B, S, 4) and out.dtype == np.float32


def test_rules_see_inputs_by_position():
    """MultiHeadAttention with packed QKV: key and value omitted, the bias still input 3."""
    rule = contrib_shapes.multi_head_attention
    qkv, bias = TensorType(np.dtype(np.float32), (B, S, N, 3, 4)), TensorType(np.dtype(np.float32), (3 * N * 4,))
    out, pk, pv, qk = rule(qkv, None, None, bias, num_heads=N)
    assert (out.shape, pk.shape, pv.shape, qk.shape) == ((B, S, 8), (B, N, S, 4), (B, N, S, 4), (B, N, S, S))


def test_runtime_sizes_stay_unknown_and_refused_inputs_give_no_type():
    f32 = np.dtype(np.float32)
    out, present, _, qk = contrib_shapes.group_query_attention(
        TensorType(f32, (1, 1, 64)), TensorType(f32, (1, 1, 32)), TensorType(f32, (1, 1, 32)),
        num_heads=4, kv_num_heads=2)
    assert (out.shape, present.shape, qk.shape) == ((1, 1, 64), (1, 2, None, 16), (1, 4, 1, None))
    assert contrib_shapes.bias_split_gelu(TensorType(f32, (2, 7)), TensorType(f32, (7,))) == TensorType()
    assert contrib_shapes.attention(TensorType(f32, (2, 3, 8)), TensorType(f32, (8, 10)), num_heads=2) == TensorType()


def test_onnx_domain_norms_before_opset_17():
    """ORT's SimplifiedLayerNormalization and LayerNormalization-1, which onnx does not infer."""
    x, g = rand(2, 3, 8), rand(8)
    for op, opset, outs in [("SimplifiedLayerNormalization", 17, 2), ("LayerNormalization", 16, 3)]:
        model = one_node(op, [x, g], outs, domain="", opset=opset)
        compiled = gx.Session(gx.load(model)).compile({"in0": x, "in1": g})
        got = [str(compiled.graph.values[o.name].type) for o in model.graph.output]
        assert got == ["float32[2x3x8]"] + ["float32[2x3x1]"] * (outs - 1), op
    assert lookup_custom("LayerNormalization", "", 16) is not None
    assert lookup_custom("LayerNormalization", "", 17) is None   # onnx infers version 17 itself


def test_a_rule_without_a_cost_rule_keeps_the_contrib_cost():
    c = CostInput([(2, 3, 5, 4), (2, 3, 6, 5)], [(2, 3, 4, 6)], 0, 0, {"transA": 1, "transB": 1})
    assert lookup_custom("FusedMatMul", MS) is not None
    assert custom_cost("FusedMatMul", MS, c) is None   # node_cost's com.microsoft rule applies


@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_dynamic_quantize_lstm_outputs_are_the_kernels(direction):
    from test_rnn import make_model, quantized_case

    ins = quantized_case(True, False, direction, [6, 2, 4])
    model = make_model("DynamicQuantizeLSTM", ins, ["Y", "Y_h", "Y_c"], {"hidden_size": 4, "direction": direction},
                       domain=MS)
    feeds = {n: v for n, v in ins if v is not None}
    session = gx.Session(gx.load(model))
    outs = session.run(feeds).outputs
    for name in ("Y", "Y_h", "Y_c"):
        t = session.compiled.graph.values[name].type
        assert t.is_static and (t.dtype, t.shape) == (outs[name].dtype, outs[name].shape), name
