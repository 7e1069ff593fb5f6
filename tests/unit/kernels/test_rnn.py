"""LSTM, GRU, RNN and com.microsoft DynamicQuantizeLSTM against onnxruntime on one-node
models, plus the ONNX node tests of the three ops.

onnxruntime is the oracle because onnx's reference ignores activations, clip and
sequence_lens; it computes float32 only, so float64 and float16 are checked against its
float32 result within float32 (resp. float16) precision.
"""

from __future__ import annotations

import warnings

import numpy as np
import onnx
import pytest
from onnx import helper

import graphexec as gx
from graphexec.kernels.cost import node_cost
from graphexec.kernels.dispatch import NodeRunner

ort = pytest.importorskip("onnxruntime")
RNG = np.random.default_rng(7)
GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
OUTS = {"LSTM": ["Y", "Y_h", "Y_c"], "GRU": ["Y", "Y_h"], "RNN": ["Y", "Y_h"]}


def rand(*shape: int, scale: float = 1.0) -> np.ndarray:
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


def make_model(op: str, ins: list[tuple[str, np.ndarray | None]], outs: list[str], attrs: dict,
               opset: int = 22, domain: str = "") -> onnx.ModelProto:
    names = [n if v is not None else "" for n, v in ins]
    while names and not names[-1]:
        names.pop()
    node = helper.make_node(op, names, outs, domain=domain, **attrs)
    inputs = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
              for n, v in ins if v is not None]
    graph = helper.make_graph([node], "g", inputs, [onnx.ValueInfoProto(name=o) for o in outs if o])
    opsets = [helper.make_opsetid("", opset)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 10
    return model


def run_ort(model: onnx.ModelProto, feeds: dict) -> list[np.ndarray]:
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1   # DynamicQuantizeLSTM quantizes h per thread's rows; one thread: the whole batch
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, feeds)


def run_ours(model: onnx.ModelProto, feeds: dict) -> list[np.ndarray]:
    """Our kernel on the model's one node; it must not fall back nor warn (overflow)."""
    graph = gx.load(model)
    runner = NodeRunner(graph.nodes[0], graph)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = runner(feeds)
    assert not runner.uses_fallback
    return [got[o] for o in graph.nodes[0].outputs if o]


def case(op: str, direction: str = "forward", seq: int = 5, batch: int = 3, inp: int = 4, hidden: int = 6,
         bias: bool = True, lens: list[int] | None = None, init: bool = True, peep: bool = False,
         scale: float = 1.0) -> list[tuple[str, np.ndarray | None]]:
    """The inputs of one node, optional ones present or None."""
    d, g = (2 if direction == "bidirectional" else 1), GATES[op]
    state = (lambda: rand(d, batch, hidden)) if init else (lambda: None)
    ins = [("X", rand(seq, batch, inp, scale=scale)), ("W", rand(d, g * hidden, inp, scale=0.5)),
           ("R", rand(d, g * hidden, hidden, scale=0.5)),
           ("B", rand(d, 2 * g * hidden) if bias else None),
           ("sequence_lens", None if lens is None else np.array(lens, np.int32)), ("initial_h", state())]
    if op == "LSTM":
        ins += [("initial_c", state()), ("P", rand(d, 3 * hidden) if peep else None)]
    return ins


def check(op: str, ins: list, attrs: dict, opset: int = 22, outs: list[str] | None = None,
          rtol: float = 1e-5, atol: float = 1e-5) -> None:
    outs = outs or OUTS[op]
    hidden = ins[2][1].shape[-1]
    model = make_model(op, ins, outs, {"hidden_size": hidden, **attrs}, opset)
    feeds = {n: v for n, v in ins if v is not None}
    ref, got = run_ort(model, feeds), run_ours(model, feeds)
    assert len(got) == len(ref)
    for o, r in zip(got, ref):
        assert o.shape == r.shape and o.dtype == r.dtype
        np.testing.assert_allclose(o, r, rtol=rtol, atol=atol)


DIRECTIONS = ["forward", "reverse", "bidirectional"]


@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("direction", DIRECTIONS)
@pytest.mark.parametrize("opset", [7, 14, 22])
def test_defaults_and_full_inputs(op, direction, opset):
    check(op, case(op, direction, bias=False, init=False), {"direction": direction}, opset)
    check(op, case(op, direction, peep=True), {"direction": direction}, opset)


@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("direction", DIRECTIONS)
@pytest.mark.parametrize("lens", [[5, 2, 0], [1, 5, 3], [3, 3, 3], [2, 1, 2]])
def test_sequence_lens(op, direction, lens):
    """Y is zero past each length, final states come from each sequence's last valid step,
    and the reverse direction starts at each sequence's own end (ORT's MixedSequenceLengths)."""
    check(op, case(op, direction, lens=lens, peep=True), {"direction": direction})


def feeds_of(ins: list) -> dict:
    return {n: v for n, v in ins if v is not None}


@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("direction", DIRECTIONS)
@pytest.mark.parametrize("opset", [14, 22])
def test_layout_batch_first(op, direction, opset):
    """onnxruntime refuses layout=1: the oracle is its layout-0 run, transposed."""
    ins = case(op, direction, lens=[4, 5, 2], peep=True)
    batch_first = [(n, np.ascontiguousarray(v.transpose(1, 0, 2)) if n in ("X", "initial_h", "initial_c") else v)
                   for n, v in ins]
    attrs = {"hidden_size": 6, "direction": direction}
    ref = run_ort(make_model(op, ins, OUTS[op], attrs), feeds_of(ins))
    got = run_ours(make_model(op, batch_first, OUTS[op], {**attrs, "layout": 1}, opset), feeds_of(batch_first))
    want = [ref[0].transpose(2, 0, 1, 3)] + [r.transpose(1, 0, 2) for r in ref[1:]]
    for o, r in zip(got, want):
        assert o.shape == r.shape
        np.testing.assert_allclose(o, r, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
def test_clip_with_large_inputs(op):
    """clip bounds every activation input (ORT's LargeBatchWithClip): batch 32, inputs ~30."""
    check(op, case(op, "bidirectional", batch=32, scale=30.0, peep=True), {"direction": "bidirectional",
                                                                          "clip": 2.5})


# (activations of one direction, alpha, beta): every activation the spec lists
LSTM_ACTS = [(["Sigmoid", "Tanh", "Tanh"], [], []),
             (["HardSigmoid", "LeakyRelu", "Softsign"], [0.3, 0.05], [0.4]),
             (["Sigmoid", "Elu", "ScaledTanh"], [0.7, 1.5], [0.8]),
             (["Affine", "Softplus", "ThresholdedRelu"], [0.2, 0.1], [0.5]),
             (["sigmoid", "Relu", "Tanh"], [], [])]


@pytest.mark.parametrize("acts,alpha,beta", LSTM_ACTS)
@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
def test_lstm_activations(acts, alpha, beta, direction):
    attrs = {"direction": direction, "activations": acts * (2 if direction == "bidirectional" else 1)}
    if alpha:
        attrs["activation_alpha"] = alpha * (2 if direction == "bidirectional" else 1)
    if beta:
        attrs["activation_beta"] = beta * (2 if direction == "bidirectional" else 1)
    check("LSTM", case("LSTM", direction, lens=[5, 3, 4]), attrs, rtol=1e-4, atol=1e-4)


def test_activations_differ_per_direction():
    attrs = {"direction": "bidirectional", "activations": ["Sigmoid", "Tanh", "Tanh", "HardSigmoid", "Softsign",
                                                           "Elu"], "activation_alpha": [0.25, 0.9],
             "activation_beta": [0.45]}
    check("LSTM", case("LSTM", "bidirectional", peep=True), attrs)
    check("GRU", case("GRU", "bidirectional"), {"direction": "bidirectional", "activations": [
        "Sigmoid", "Tanh", "HardSigmoid", "LeakyRelu"], "activation_alpha": [0.3, 0.2], "activation_beta": [0.5]})


GRU_ACTS = [(["HardSigmoid", "Softsign"], [0.25], [0.45]), (["Sigmoid", "Relu"], [], []),
            (["Sigmoid", "ScaledTanh"], [1.5], [0.6]), (["Sigmoid", "Affine"], [0.5], [0.1]),
            (["Sigmoid", "Softplus"], [], []), (["HardSigmoid", "ThresholdedRelu"], [0.2, 0.05], [0.5]),
            (["Sigmoid", "Elu"], [0.8], [])]


@pytest.mark.parametrize("acts,alpha,beta", GRU_ACTS)
@pytest.mark.parametrize("lbr", [0, 1])
def test_gru_activations_and_linear_before_reset(acts, alpha, beta, lbr):
    attrs = {"activations": acts, "linear_before_reset": lbr}
    if alpha:
        attrs["activation_alpha"] = alpha
    if beta:
        attrs["activation_beta"] = beta
    check("GRU", case("GRU", "forward", lens=[5, 2, 4]), attrs, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("lbr", [0, 1])
@pytest.mark.parametrize("direction", DIRECTIONS)
def test_gru_linear_before_reset(lbr, direction):
    check("GRU", case("GRU", direction, lens=[3, 5, 1]), {"direction": direction, "linear_before_reset": lbr})


RNN_ACTS = [("Relu", None, None), ("Sigmoid", None, None), ("Affine", 0.5, 0.2), ("LeakyRelu", 0.1, None),
            ("ThresholdedRelu", 0.3, None), ("ScaledTanh", 1.2, 0.7), ("HardSigmoid", 0.3, 0.4),
            ("Elu", 0.9, None), ("Softsign", None, None), ("Softplus", None, None)]


@pytest.mark.parametrize("act,alpha,beta", RNN_ACTS)
def test_rnn_activations(act, alpha, beta):
    """RNN's alpha/beta lists are positional, one entry per direction's activation."""
    attrs: dict = {"direction": "bidirectional", "activations": [act, "Tanh"]}
    if alpha is not None:
        attrs["activation_alpha"] = [alpha, 0.0]
    if beta is not None:
        attrs["activation_beta"] = [beta, 0.0]
    check("RNN", case("RNN", "bidirectional", lens=[5, 1, 3]), attrs, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("direction", DIRECTIONS)
def test_lstm_input_forget(direction):
    check("LSTM", case("LSTM", direction, peep=True, lens=[4, 5, 2]), {"direction": direction, "input_forget": 1})


@pytest.mark.parametrize("outs", [["Y"], ["", "Y_h"], ["", "", "Y_c"], ["Y", "", "Y_c"]])
def test_omitted_outputs(outs):
    check("LSTM", case("LSTM", "bidirectional", lens=[2, 5, 3]), {"direction": "bidirectional"}, outs=outs)
    if "Y_c" not in outs:
        check("GRU", case("GRU", "reverse"), {"direction": "reverse"}, outs=outs)
        check("RNN", case("RNN", "reverse"), {"direction": "reverse"}, outs=outs)


@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-5), (np.float16, 2e-2)])
def test_other_float_types(op, dtype, tol):
    """onnxruntime has float32 kernels only: its float32 result is the oracle."""
    ins = case(op, "bidirectional", lens=[5, 2, 4], peep=True)
    attrs = {"hidden_size": 6, "direction": "bidirectional"}
    typed = [(n, v if v is None or v.dtype != np.float32 else v.astype(dtype)) for n, v in ins]
    ref = run_ort(make_model(op, ins, OUTS[op], attrs), {n: v for n, v in ins if v is not None})
    got = run_ours(make_model(op, typed, OUTS[op], attrs), {n: v for n, v in typed if v is not None})
    for o, r in zip(got, ref):
        assert o.dtype == dtype
        np.testing.assert_allclose(o.astype(np.float32), r, rtol=tol, atol=tol)


@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
def test_no_overflow_warning_on_huge_inputs(op):
    """Inputs ~1e4 through exp-based activations: run_ours turns any RuntimeWarning into an
    error. onnxruntime's Softplus (log(1 + e^x)) overflows to inf and NaN there, so with
    Elu/Softplus the oracle is our own float64 run: float32 must stay finite and agree."""
    check(op, case(op, "reverse", scale=1e4), {"direction": "reverse"}, rtol=1e-4, atol=1e-3)
    acts = {"LSTM": ["Sigmoid", "Elu", "Softplus"], "GRU": ["Sigmoid", "Softplus"], "RNN": ["Elu"]}[op]
    ins = case(op, "bidirectional", scale=1e4, lens=[5, 2, 3])
    wide = [(n, v if v is None or v.dtype != np.float32 else v.astype(np.float64)) for n, v in ins]
    attrs = {"hidden_size": 6, "direction": "bidirectional", "activations": acts * 2}
    got = run_ours(make_model(op, ins, OUTS[op], attrs), feeds_of(ins))
    want = run_ours(make_model(op, wide, OUTS[op], attrs), feeds_of(wide))
    for o, w in zip(got, want):
        assert np.isfinite(o).all()
        np.testing.assert_allclose(o, w, rtol=1e-4, atol=1e-2)


def test_opset_1_and_gru_3():
    """The opset 1 schemas add only output_sequence, which changes no value."""
    for op, opset in (("LSTM", 1), ("GRU", 1), ("GRU", 3), ("RNN", 1)):
        ins = case(op, "bidirectional")
        model = make_model(op, ins, OUTS[op], {"hidden_size": 6, "direction": "bidirectional"}, opset)
        ref = make_model(op, ins, OUTS[op], {"hidden_size": 6, "direction": "bidirectional"}, 7)
        feeds = {n: v for n, v in ins if v is not None}
        for o, r in zip(run_ours(model, feeds), run_ort(ref, feeds)):
            np.testing.assert_allclose(o, r, rtol=1e-5, atol=1e-5)


def quantized_case(signed: bool, per_channel: bool, direction: str, lens: list[int] | None):
    d, seq, batch, inp, hidden = (2 if direction == "bidirectional" else 1), 6, 3, 5, 4
    qt = np.int8 if signed else np.uint8
    lo, hi = (-64, 64) if signed else (0, 256)   # X and h are quantized to uint8: test_quant.u8s8
    shape = (d, 4 * hidden) if per_channel else (d,)
    # ORT takes one zero point per direction: per-channel ones must be constant (0 when signed)
    zp = (lambda v: np.zeros(shape, qt)) if signed else (lambda v: np.full(shape, v, qt))
    return [("X", rand(seq, batch, inp)), ("W", RNG.integers(lo, hi, (d, inp, 4 * hidden)).astype(qt)),
            ("R", RNG.integers(lo, hi, (d, hidden, 4 * hidden)).astype(qt)), ("B", rand(d, 8 * hidden)),
            ("sequence_lens", None if lens is None else np.array(lens, np.int32)),
            ("initial_h", rand(d, batch, hidden)), ("initial_c", rand(d, batch, hidden)),
            ("P", rand(d, 3 * hidden)), ("W_scale", (RNG.random(shape) * 0.01 + 0.002).astype(np.float32)),
            ("W_zero_point", zp(131)), ("R_scale", (RNG.random(shape) * 0.01 + 0.002).astype(np.float32)),
            ("R_zero_point", zp(120))]


@pytest.mark.parametrize("signed", [True, False])
@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("direction,lens", [("forward", None), ("reverse", [6, 2, 4]),
                                            ("bidirectional", [3, 6, 1])])
def test_dynamic_quantize_lstm(signed, per_channel, direction, lens):
    """We quantize X and h to uint8 as onnxruntime does and multiply the dequantized values
    in float32, where it accumulates integers: the same products up to float32 rounding,
    which can flip a rounding tie of a later step's h, hence a tolerance of a few ulps
    of the quantization step rather than float32 precision."""
    ins = quantized_case(signed, per_channel, direction, lens)
    model = make_model("DynamicQuantizeLSTM", ins, ["Y", "Y_h", "Y_c"], {"hidden_size": 4, "direction": direction},
                       domain="com.microsoft")
    feeds = {n: v for n, v in ins if v is not None}
    for o, r in zip(run_ours(model, feeds), run_ort(model, feeds)):
        assert o.shape == r.shape and o.dtype == r.dtype
        np.testing.assert_allclose(o, r, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("op", ["LSTM", "DynamicQuantizeLSTM"])
def test_session_with_constant_weights(op):
    """Through a whole Session with the weights as initializers (their re-layout is cached
    by the node): two runs, both equal to onnxruntime."""
    if op == "LSTM":
        ins, consts, domain = case("LSTM", "bidirectional", lens=[4, 5, 1], peep=True), {"W", "R", "B", "P"}, ""
    else:
        ins, domain = quantized_case(True, True, "bidirectional", [4, 6, 1]), "com.microsoft"
        consts = {"W", "R", "B", "P", "W_scale", "W_zero_point", "R_scale", "R_zero_point"}
    hidden = ins[5][1].shape[-1]
    model = make_model(op, ins, OUTS["LSTM"], {"hidden_size": hidden, "direction": "bidirectional"}, domain=domain)
    model.graph.initializer.extend(onnx.numpy_helper.from_array(v, n) for n, v in ins if n in consts)
    keep = [i for i in model.graph.input if i.name not in consts]
    del model.graph.input[:]
    model.graph.input.extend(keep)
    feeds = {n: v for n, v in ins if v is not None and n not in consts}
    session = gx.Session(gx.load(model))
    ref = run_ort(model, feeds)
    for _ in range(2):
        for o, r in zip(session.run(feeds).outputs.values(), ref):
            np.testing.assert_allclose(o, r, rtol=1e-3 if domain else 1e-5, atol=1e-3 if domain else 1e-5)


def test_onnx_node_tests():
    from tests.e2e.node_suite import collect, run_case

    cases = [c for c in collect() if any(k in c.name for k in ("lstm", "gru", "rnn"))]
    assert len(cases) >= 18
    failed = [(r.name, r.error) for r in map(run_case, cases) if not r.ok]
    assert not failed
    for c in cases:
        graph = gx.load(c.model)
        runner = NodeRunner(graph.nodes[0], graph)
        inputs, _ = c.data_sets[0]
        feeds = dict(zip(graph.inputs, [onnx.numpy_helper.to_array(t) if isinstance(t, onnx.TensorProto) else t
                                        for t in inputs]))
        runner(feeds)
        assert not runner.uses_fallback, c.name


def test_cost_is_cube_work():
    """2 * seq * batch * dirs * gates*H * (input + H) for the GEMMs plus the gates' vector part."""
    seq, batch, inp, h = 32, 4, 64, 128
    for op, gates in GATES.items():
        w, r = (2, gates * h, inp), (2, gates * h, h)
        cost = node_cost(op, [(seq, batch, inp), w, r], 0, [(seq, 2, batch, h)], 0,
                         {"direction": "bidirectional"}, False)
        gemm = 2.0 * seq * batch * 2 * gates * h * (inp + h)
        assert cost.unit == "cube" and gemm < cost.flops < 1.1 * gemm
        swapped = node_cost(op, [(batch, seq, inp), w, r], 0, [(batch, seq, 2, h)], 0, {"layout": 1}, False)
        assert swapped.flops == cost.flops
    q = node_cost("DynamicQuantizeLSTM", [(seq, batch, inp), (1, inp, 4 * h), (1, h, 4 * h)], 0, [], 0, {},
                  False, "com.microsoft")
    assert q.unit == "cube" and q.flops > 2.0 * seq * batch * 4 * h * (inp + h)
