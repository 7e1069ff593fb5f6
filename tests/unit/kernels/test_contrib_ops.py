"""ONNX Runtime's com.microsoft activations, normalizations and fused cube ops against
onnxruntime's CPU kernels (or the documented formula where ORT has no CPU kernel)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from contrib_oracle import check, check_formula, one_node, rand, run_ort, run_ours

import graphexec as gx
from graphexec.errors import UnsupportedOpError

DTYPES = [(np.float32, 1e-5), (np.float16, 3e-3)]


def _gelu(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    return 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))


def _fast_gelu(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    return 0.5 * x * (1 + np.tanh(0.7978845608 * x + 0.0356774081 * x ** 3))


# --- activations -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("dt,tol", DTYPES)
@pytest.mark.parametrize("op,extra", [("Gelu", 0), ("FastGelu", 0), ("FastGelu", 1), ("BiasGelu", 1), ("QuickGelu", 0)])
def test_gelu_family(op, extra, dt, tol):
    x = rand(2, 3, 16, dtype=dt, scale=3.0)
    check(op, [x] + [rand(16, dtype=dt)] * extra, rtol=tol, atol=tol)


@pytest.mark.parametrize("alpha", [1.0, 1.702, -0.5])
def test_quick_gelu_alpha(alpha):
    check("QuickGelu", [rand(4, 7, scale=4.0)], alpha=alpha)


def test_fast_gelu_rank_1_and_a_bias_that_does_not_fit():
    check("FastGelu", [rand(9)])
    ins = [rand(2, 5), rand(2, 5)]
    with pytest.raises(UnsupportedOpError, match=r"fastgelu_node .*bias of shape \(2, 5\)"):
        run_ours(one_node("FastGelu", ins), ins)


@pytest.mark.parametrize("dt,tol", DTYPES)
def test_bias_split_gelu_and_bias_add_formulas(dt, tol):
    """onnxruntime runs these two on CUDA/ROCm only: the oracle is the documented formula."""
    x, bias, skip = rand(2, 4, 12, dtype=dt), rand(12, dtype=dt), rand(2, 4, 12, dtype=dt)
    h = x.astype(np.float64) + bias
    check_formula("BiasSplitGelu", [x, bias], [(h[..., :6] * _gelu(h[..., 6:])).astype(dt)], rtol=tol, atol=tol)
    check_formula("BiasAdd", [x, bias, skip], [(h + skip).astype(dt)], rtol=tol, atol=tol)


@pytest.mark.parametrize("shape,bias,axis,inner", [
    ((8, 4, 4, 2, 2, 8), (8, 4, 1, 1, 2, 8), 4, 1), ((8, 4, 4, 2, 2, 8), (8, 1, 1, 2, 2, 8), -3, 1),
    ((8, 4, 4, 2, 2, 8), (1, 2, 8), 4, 1), ((8, 4, 4, 2, 2, 8), (1, 4, 2, 2, 8), 4, 0),
    ((8, 4, 4, 2, 2, 8), (4, 4, 2, 2, 8), -3, 0), ((4, 2, 64), (2, 64), 2, 0), ((4, 2, 64), (4, 1, 64), 2, 1)])
@pytest.mark.parametrize("dt,tol", DTYPES)
def test_bias_softmax_formula(shape, bias, axis, inner, dt, tol):
    """CUDA/ROCm only in ORT: the shapes of ORT's own tests, against softmax(x + bias) over the
    flattened dims from axis on (their reference)."""
    x, b = rand(*shape, dtype=dt, scale=3.0), rand(*bias, dtype=dt)
    z = (x.astype(np.float64) + b).reshape(math.prod(shape[:axis % len(shape)]), -1)
    e = np.exp(z - z.max(axis=1, keepdims=True))
    want = (e / e.sum(axis=1, keepdims=True)).reshape(shape).astype(dt)
    check_formula("BiasSoftmax", [x, b], [want], rtol=tol, atol=tol, axis=axis, is_inner_broadcast=inner)


def test_gemm_fast_gelu_formula():
    x, w, b = rand(2, 3, 8), rand(8, 5), rand(5)
    check_formula("GemmFastGelu", [x, w, b], [_fast_gelu(x @ w + b).astype(np.float32)])
    check_formula("GemmFastGelu", [x, w], [_fast_gelu(x @ w).astype(np.float32)])


# --- normalizations --------------------------------------------------------------------------------------

@pytest.mark.parametrize("dt,tol", DTYPES)
@pytest.mark.parametrize("skip_shape,beta,bias", [((2, 3, 8), True, True), ((1, 3, 8), False, False),
                                                  ((3, 8), False, True), ((2, 3, 8), True, False)])
def test_skip_layer_norm(skip_shape, beta, bias, dt, tol):
    ins = [rand(2, 3, 8, dtype=dt), rand(*skip_shape, dtype=dt), rand(8, dtype=dt),
           rand(8, dtype=dt) if beta else None, rand(8, dtype=dt) if bias else None]
    check("SkipLayerNormalization", ins, 4, rtol=tol, atol=tol, epsilon=1e-5)


def test_skip_layer_norm_2d_and_skipped_outputs():
    x, s, g, b = rand(5, 16), rand(5, 16), rand(16), rand(16)
    check("SkipLayerNormalization", [x, s, g, b])
    check("SkipLayerNormalization", [rand(2, 5, 16), s, g, b], outputs=["y", "", "", "sum"])


@pytest.mark.parametrize("dt,tol", DTYPES)
@pytest.mark.parametrize("shape,bias", [((2, 3, 8), True), ((4, 8), False)])
def test_skip_simplified_layer_norm(shape, bias, dt, tol):
    ins = [rand(*shape, dtype=dt), rand(*shape, dtype=dt), rand(8, dtype=dt), rand(8, dtype=dt) if bias else None]
    check("SkipSimplifiedLayerNormalization", ins, 4, rtol=tol, atol=tol)


@pytest.mark.parametrize("dt,tol", DTYPES + [(np.float64, 1e-6)])
@pytest.mark.parametrize("axis,outs", [(-1, 2), (1, 2), (-1, 1)])
def test_simplified_layer_norm_default_domain(axis, outs, dt, tol):
    """ORT registers SimplifiedLayerNormalization in the ONNX domain, version 1."""
    x = rand(2, 3, 8, dtype=dt)
    scale = rand(*x.shape[axis % 3:], dtype=dt)
    check("SimplifiedLayerNormalization", [x, scale], outs, domain="", rtol=tol, atol=tol, axis=axis, epsilon=1e-6)


@pytest.mark.parametrize("opset", [11, 16])
@pytest.mark.parametrize("dt,tol", DTYPES)
def test_layer_norm_before_opset_17(opset, dt, tol):
    x, g, b = rand(2, 3, 8, dtype=dt), rand(8, dtype=dt), rand(8, dtype=dt)
    check("LayerNormalization", [x, g, b], 3, domain="", opset=opset, rtol=tol, atol=tol)
    check("LayerNormalization", [x, rand(3, 8, dtype=dt)], domain="", opset=opset, rtol=tol, atol=tol, axis=1)


def test_layer_norm_before_opset_17_other_stash_type_is_a_clear_error():
    ins = [rand(2, 8), rand(8)]
    with pytest.raises(UnsupportedOpError, match=r"layernormalization_node \(ai.onnx::LayerNormalization\): "
                                                 r"LayerNormalization: stash_type != 1"):
        run_ours(one_node("LayerNormalization", ins, domain="", opset=16, stash_type=0), ins)


def _embed_inputs(segments: bool, mask: bool, position_ids: str | None):
    b, s, h = 2, 5, 8
    rng = np.random.default_rng(5)
    ids = rng.integers(0, 30, (b, s)).astype(np.int32)
    pos = {None: None, "1": np.array([[4, 3, 2, 1, 0]], np.int32),
           "b": rng.integers(0, 16, (b, s)).astype(np.int32)}[position_ids]
    return [ids, rng.integers(0, 2, (b, s)).astype(np.int32) if segments else None, rand(30, h), rand(16, h),
            rand(2, h) if segments else None, rand(h), rand(h),
            np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], np.int32) if mask else None, pos]


@pytest.mark.parametrize("segments,mask,position_ids", [(True, True, None), (True, False, None),
                                                        (False, True, None), (True, True, "1"), (False, True, "b")])
def test_embed_layer_norm(segments, mask, position_ids):
    check("EmbedLayerNormalization", _embed_inputs(segments, mask, position_ids), 3, epsilon=1e-5)


def test_embed_layer_norm_out_of_range_id_is_a_clear_error():
    ins = _embed_inputs(True, True, None)
    ins[0] = ins[0].copy()
    ins[0][0, 0] = 99
    with pytest.raises(UnsupportedOpError, match=r"embedlayernormalization_node .*input_ids outside \[0, 30\)"):
        run_ours(one_node("EmbedLayerNormalization", ins, 2), ins)


# --- fused cube ops --------------------------------------------------------------------------------------

def _undo(x: np.ndarray, batch: bool, last: bool) -> np.ndarray:
    """The input that FusedMatMul's transposes turn into ``x``."""
    if last:
        x = np.swapaxes(x, -1, -2)
    return np.ascontiguousarray(np.moveaxis(x, -2, 0) if batch else x)


@pytest.mark.parametrize("dt,tol", DTYPES)
@pytest.mark.parametrize("flags", [(0, 0, 0, 0), (1, 0, 0, 0), (0, 1, 0, 0), (1, 1, 0, 0), (0, 0, 1, 0),
                                   (0, 0, 0, 1), (1, 0, 1, 1), (0, 1, 1, 1), (1, 1, 1, 1)])
def test_fused_matmul(flags, dt, tol):
    ta, tb, tba, tbb = flags
    a, b = _undo(rand(2, 3, 4, 5, dtype=dt), tba, ta), _undo(rand(2, 3, 5, 6, dtype=dt), tbb, tb)
    check("FusedMatMul", [a, b], rtol=tol, atol=tol, alpha=0.125, transA=ta, transB=tb, transBatchA=tba,
          transBatchB=tbb)


@pytest.mark.parametrize("a,b,attrs", [((3, 4), (4, 5), {}), ((2, 3, 4), (4, 5), {"alpha": 2.0}),
                                       ((4, 3), (2, 5, 4), {"transA": 1, "transB": 1}), ((4,), (4, 5), {})])
def test_fused_matmul_broadcasting(a, b, attrs):
    check("FusedMatMul", [rand(*a), rand(*b)], **attrs)
    check("TransposeMatMul", [rand(*a), rand(*b)], **attrs)


def test_fused_matmul_batch_transpose_of_mixed_ranks_is_a_clear_error():
    ins = [rand(4, 5), rand(2, 5, 6)]
    with pytest.raises(UnsupportedOpError, match=r"fusedmatmul_node \(com.microsoft::FusedMatMul\): transBatch"):
        run_ours(one_node("FusedMatMul", ins, transBatchA=1), ins)


GEMM_ACTS = [("Relu", {}), ("LeakyRelu", {"activation_alpha": 0.2}), ("Tanh", {}), ("Sigmoid", {}),
             ("HardSigmoid", {"activation_alpha": 0.3, "activation_beta": 0.4}), ("Elu", {"activation_alpha": 0.5}),
             ("Softsign", {}), ("Softplus", {}), ("ThresholdedRelu", {"activation_alpha": 0.5}),
             ("ScaledTanh", {"activation_alpha": 2.0, "activation_beta": 0.5})]


@pytest.mark.parametrize("act,params", GEMM_ACTS)
def test_fused_gemm(act, params):
    check("FusedGemm", [rand(3, 4), rand(4, 5), rand(5)], activation=act, alpha=0.5, beta=2.0, **params)


@pytest.mark.parametrize("dt,tol", DTYPES)
def test_fused_gemm_transposed_without_c(dt, tol):
    check("FusedGemm", [rand(4, 3, dtype=dt), rand(5, 4, dtype=dt)], rtol=tol, atol=tol, activation="Relu",
          transA=1, transB=1)


CONV_ACTS = [("Relu", []), ("LeakyRelu", [0.2]), ("Tanh", []), ("Sigmoid", []), ("HardSigmoid", [0.3, 0.4]),
             ("Clip", [-0.5, 0.5])]


@pytest.mark.parametrize("act,params", CONV_ACTS)
@pytest.mark.parametrize("with_z", [False, True])
def test_fused_conv(act, params, with_z):
    x, w, b = rand(1, 3, 6, 6), rand(4, 3, 3, 3), rand(4)
    ins = [x, w, b] + ([rand(1, 4, 6, 6)] if with_z else [])
    extra = {"activation_params": params} if params else {}
    check("FusedConv", ins, activation=act, pads=[1, 1, 1, 1], **extra)


def test_fused_conv_plain_strided_grouped_and_half():
    check("FusedConv", [rand(2, 4, 7, 7), rand(6, 2, 3, 3)], strides=[2, 2], group=2)
    check("FusedConv", [rand(1, 3, 5, 5, dtype=np.float16), rand(2, 3, 3, 3, dtype=np.float16)],
          activation="Relu", rtol=3e-3, atol=3e-3)


def test_fused_activation_unknown_is_a_clear_error():
    ins = [rand(3, 4), rand(4, 5)]
    with pytest.raises(UnsupportedOpError, match=r"fusedgemm_node .*activation 'Gelu'"):
        run_ours(one_node("FusedGemm", ins, activation="Gelu"), ins)


@pytest.mark.parametrize("attrs", [{}, {"pads": [1, 1, 1, 1], "strides": [2, 2]}, {"group": 2, "dilations": [2, 2]}])
def test_nhwc_conv_equals_onnx_conv_on_nchw(attrs):
    """NhwcConv has no CPU kernel in ORT: the oracle is ORT's Conv on the channels-first data."""
    x, w, b = rand(2, 4, 7, 7), rand(6, 4 // attrs.get("group", 1), 3, 3), rand(6)
    ref = run_ort(one_node("Conv", [x, w, b], domain="", **attrs), [x, w, b])[0]
    nhwc = [np.ascontiguousarray(x.transpose(0, 2, 3, 1)), np.ascontiguousarray(w.transpose(0, 2, 3, 1)), b]
    check_formula("NhwcConv", nhwc, [np.ascontiguousarray(ref.transpose(0, 2, 3, 1))], **attrs)


# --- errors ----------------------------------------------------------------------------------------------

def test_unknown_contrib_op_fails_at_compile_time_naming_op_and_node():
    x = rand(2, 3)
    session = gx.Session(gx.load(one_node("NoSuchOp", [x])))
    with pytest.raises(UnsupportedOpError, match=r"node nosuchop_node \(NoSuchOp\): .*com.microsoft::NoSuchOp"):
        session.compile({"in0": x})
