"""com.microsoft QAttention, QEmbedLayerNormalization and QLinearWhere against onnxruntime's CPU kernels, on
the combinations onnxruntime's own tests use (quantize_attention_op_test.cc,
qembed_layer_norm_op_test.cc): uint8 input with uint8 or int8 weights, per-tensor and
per-column weight parameters, mask_index shorter than, equal to and beyond the sequence, no
mask, unidirectional, past state, a pruned model (input_hidden_size > hidden_size).

Tolerances: QAttention's projection (its present output) is bit-exact with onnxruntime, but
its softmax uses MLAS's own exp and summation order, so the attention output agrees to float32
rounding (rtol 1e-5, atol 1e-6), not bit for bit. QEmbedLayerNormalization is bit-exact.
Forms onnxruntime's CPU kernel lacks (int8 input, float16 scales) are checked against its
float Attention on the dequantized operands.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import pytest
from contrib_oracle import one_node, run_ort, run_ours
from onnx import numpy_helper

import graphexec as gx
from graphexec.errors import UnsupportedOpError
from graphexec.ir import TensorType
from graphexec.kernels.cost import cube_dtype, node_cost

MS = "com.microsoft"
RNG = np.random.default_rng(11)
B, S, N, H = 2, 4, 2, 4
D = N * H
TOL = {"rtol": 1e-5, "atol": 1e-6}
i32 = lambda *v: np.array(v, np.int32)  # noqa: E731
f32 = lambda *v: np.array(v, np.float32)  # noqa: E731


def _u8(*shape: int, lo: int = 0, hi: int = 256) -> np.ndarray:
    return RNG.integers(lo, hi, shape).astype(np.uint8)


def _weights(dtype: Any, din: int, per_column: bool, hidden: int = D) -> tuple[np.ndarray, ...]:
    """(weight, weight_scale, weight_zero_point) of an 8-bit (din, 3·hidden) weight, as ORT's tests
    draw them: int8 weights in [-64, 63], uint8 ones in [0, 127]; per column: 3·hidden of each."""
    n = 3 * hidden
    w = RNG.integers(-64, 64, (din, n)) if dtype == np.int8 else RNG.integers(0, 128, (din, n))
    k = n if per_column else 1
    scale = (RNG.random(k) * 0.02 + 0.002).astype(np.float32)
    zp = RNG.integers(-64, 64, k) if dtype == np.int8 else RNG.integers(0, 128, k)
    return w.astype(dtype), scale, zp.astype(dtype)


def _qattention_inputs(wdt: Any = np.int8, per_column: bool = False, mask: np.ndarray | None = None,
                       past: int | None = None, din: int = D, s: int = S) -> list[np.ndarray | None]:
    w, ws, wz = _weights(wdt, din, per_column)
    pst = None if past is None else RNG.standard_normal((2, B, N, past, H)).astype(np.float32)
    return [_u8(B, s, din), w, RNG.standard_normal(3 * D).astype(np.float32), f32(0.03), ws, mask,
            np.array([129], np.uint8), wz, pst]


def _check(inputs: list, num_outputs: int = 1, **attrs: Any) -> list[np.ndarray]:
    """Ours equals onnxruntime (present bit-exact, output to TOL); the outputs' inferred types
    are the very ones the kernel returned (memory planning relies on them)."""
    model = one_node("QAttention", inputs, num_outputs, **attrs)
    ours, ref = run_ours(model, inputs), run_ort(model, inputs)
    for i, (o, r) in enumerate(zip(ours, ref)):
        assert (o.shape, o.dtype) == (r.shape, r.dtype), f"output {i}"
        if i == 1:
            np.testing.assert_array_equal(o, r, err_msg="present")
        else:
            np.testing.assert_allclose(o, r, **TOL, err_msg="output")
    _check_types(model, ours)
    return ours


def _check_types(model: onnx.ModelProto, outs: list[np.ndarray]) -> None:
    graph = gx.Session(gx.load(model)).compiled.graph
    for vi, got in zip(model.graph.output, outs):
        t = graph.values[vi.name].type
        assert t.is_static and (t.dtype, t.shape) == (got.dtype, got.shape), f"{vi.name}: inferred {t}"


# --- QAttention ----------------------------------------------------------------------------------

MASKS = {"none": None, "full": i32(S, S), "partial": i32(1, 3), "exceed": i32(S + 1, S),
         "zero": i32(0, 2), "raw_2d": i32([1, 1, 0, 1], [1, 1, 1, 0]), "left_pad_2b": i32(4, 4, 1, 0)}


@pytest.mark.parametrize("mask", sorted(MASKS))
@pytest.mark.parametrize("wdt,per_column", [(np.uint8, False), (np.int8, False), (np.uint8, True),
                                            (np.int8, True)])
def test_qattention_weight_types_and_masks(wdt, per_column, mask):
    _check(_qattention_inputs(wdt, per_column, MASKS[mask]), num_heads=N)


@pytest.mark.parametrize("wdt", [np.uint8, np.int8])
@pytest.mark.parametrize("mask", [None, i32(3, 2)])
def test_qattention_unidirectional(wdt, mask):
    _check(_qattention_inputs(wdt, False, mask), num_heads=N, unidirectional=1)


@pytest.mark.parametrize("wdt", [np.uint8, np.int8])
@pytest.mark.parametrize("per_column", [False, True])
def test_qattention_past_state(wdt, per_column):
    """ORT's QAttentionPastState: unidirectional, past prepended to K/V, present returned."""
    _check(_qattention_inputs(wdt, per_column, past=3), 2, num_heads=N, unidirectional=1)
    _check(_qattention_inputs(wdt, per_column, past=5, s=1), 2, num_heads=N, unidirectional=1)


def test_qattention_present_without_past_and_pruned_model():
    """present is just this step's K/V without past; a pruned model has input_hidden_size > hidden."""
    _check(_qattention_inputs(np.int8, True), 2, num_heads=N)
    _check(_qattention_inputs(np.uint8, False, i32(2, 4), din=12), num_heads=N)


def test_qattention_attributes():
    _check(_qattention_inputs(np.int8, False, i32(2, 3)), num_heads=N, scale=0.3)
    _check(_qattention_inputs(np.int8, False, i32(2, 3)), num_heads=N, mask_filter_value=-3.4028234663852886e38)
    _check(_qattention_inputs(np.int8, False, i32(2, 3)), num_heads=1)


def test_qattention_weight_as_initializer():
    """A constant weight (ORT pre-packs it) gives the same results as a fed one."""
    ins = _qattention_inputs(np.uint8, True, i32(3, 4))
    model = one_node("QAttention", ins, num_heads=N)
    model.graph.initializer.append(numpy_helper.from_array(ins[1], "in1"))
    model.graph.input.remove(next(i for i in model.graph.input if i.name == "in1"))
    feeds = [x if i != 1 else None for i, x in enumerate(ins)]
    np.testing.assert_array_equal(run_ours(model, feeds)[0], run_ours(one_node("QAttention", ins, num_heads=N), ins)[0])
    np.testing.assert_allclose(run_ours(model, feeds)[0], run_ort(model, feeds)[0], **TOL)


def test_qattention_omitted_zero_points_are_zero():
    ins = _qattention_inputs(np.int8, False, i32(2, 4))
    zeros = ins[:6] + [np.zeros(1, np.uint8), np.zeros(1, np.int8)] + ins[8:]
    dropped = ins[:6] + [None, None] + ins[8:]
    np.testing.assert_allclose(run_ours(one_node("QAttention", dropped, num_heads=N), dropped)[0],
                               run_ort(one_node("QAttention", zeros, num_heads=N), zeros)[0], **TOL)


def test_qattention_ort_test_vector():
    """ORT's QAttentionBatch1/MaskPartialSequence data (uint8 at scale 0.1, zero point 128) give
    its expected outputs (within its own 0.005 tolerance) and ours equals its kernel."""
    x = f32(0.8, -0.5, 0.0, 1.0, 0.5, 0.2, 0.3, -0.6).reshape(1, 2, 4)
    w = f32(0.1, -0.2, 0.3, 1.0, 1.1, 0.3, 0.5, 0.2, 0.3, -0.6, 1.5, 2.0, 0.5, 0.1, 0.4, 1.6, 1.0, 2.0, 0.4, 0.8,
            0.9, 0.1, -1.3, 0.7, 0.3, 0.2, 4.0, 2.2, 1.6, 1.1, 0.7, 0.2, 0.4, 1.0, 1.2, 0.5, 0.2, 0.1, 0.4, 1.6,
            2.4, 3.3, 2.1, 4.2, 8.4, 0.0, 2.1, 3.2).reshape(4, 12)
    bias = f32(-0.5, 0.6, 1.2, 2.1, 0.5, 0.7, 0.2, 1.2, 0.5, 0.4, 0.3, 1.2)
    q = lambda v: np.clip(np.rint(v / np.float32(0.1)) + 128, 0, 255).astype(np.uint8)  # noqa: E731
    expected = {2: [3.1495983, 0.10843669, 4.25, 5.6499996, 3.9696791, 0.07314368, 4.2499995, 5.6499991],
                1: [8.6899996, -0.13, 4.25, 5.6499996, 8.6899996, -0.13, 4.2499995, 5.6499991]}
    for length, want in expected.items():
        ins = [q(x), q(w), bias, f32(0.1), f32(0.1), i32(length), np.array([128], np.uint8),
               np.array([128], np.uint8)]
        (ours,) = _check(ins, num_heads=2)
        np.testing.assert_allclose(ours.reshape(-1), want, atol=0.005)


def _dequantized_attention(ins: list, **attrs: Any) -> np.ndarray:
    """ORT's float Attention on (input - zp)·scale and (weight - zp)·scale: the oracle for the
    forms its CPU QAttention lacks; it agrees to the float rounding of that projection."""
    x, w, bias, xs, ws, mask, xz, wz = ins[:8]
    xf = ((x.astype(np.float32) - xz.astype(np.float32)) * xs.astype(np.float32))
    wf = ((w.astype(np.float32) - wz.astype(np.float32)) * ws.astype(np.float32))
    fins = [xf, wf, bias.astype(np.float32), mask]
    return run_ort(one_node("Attention", fins, **attrs), fins)[0]


def test_qattention_int8_input_and_float16_scales():
    """onnxruntime runs these on CUDA only: int8 input (symmetric), and float16 bias and scales
    (output float16, computed in float32 and rounded once)."""
    ins = _qattention_inputs(np.int8, True, i32(3, 4))
    ins[0] = (ins[0].astype(np.int16) - 128).astype(np.int8)
    ins[6] = np.array([1], np.int8)
    ours = run_ours(one_node("QAttention", ins, num_heads=N), ins)[0]
    np.testing.assert_allclose(ours, _dequantized_attention(ins, num_heads=N), rtol=1e-4, atol=1e-5)
    half = ins[:2] + [ins[2].astype(np.float16), ins[3].astype(np.float16), ins[4].astype(np.float16)] + ins[5:]
    got = run_ours(one_node("QAttention", half, num_heads=N), half)[0]
    assert got.dtype == np.float16
    np.testing.assert_allclose(got, _dequantized_attention(half, num_heads=N), rtol=3e-3, atol=3e-3)


@pytest.mark.parametrize("attrs,ins_change,why", [
    ({"do_rotary": 1}, {}, "do_rotary"),
    ({}, {8: np.zeros((2, B, N + 1, 3, H), np.float32)}, "past of shape"),
    ({}, {4: np.full(5, 0.1, np.float32)}, "weight_scale of shape"),
    ({}, {6: np.array([3], np.int8)}, "input_zero_point is int8"),
    ({}, {1: np.zeros((D, 3 * D + 3), np.int8), 2: np.zeros(3 * D + 3, np.float32)}, "num_heads=2"),
])
def test_qattention_refusals_name_the_node(attrs, ins_change, why):
    ins = _qattention_inputs(np.int8, False)
    ins = [ins_change.get(i, x) for i, x in enumerate(ins)]
    with pytest.raises(UnsupportedOpError, match=f"qattention_node.*QAttention.*{why}"):
        run_ours(one_node("QAttention", ins, num_heads=N, **attrs), ins)


def test_qattention_cost_is_int8_attention_work():
    """The same flops and tiling as float Attention of that shape (projection, QK^T, PV, softmax),
    on the cube at the int8 rate (its operands are 8-bit)."""
    x, w, past = (B, 16, 96), (96, 3 * 96), (2, B, 12, 5, 8)
    ours = node_cost("QAttention", [x, w, (288,), (), (), (B,), (), (), past], 0, [(B, 16, 96)], 0,
                     {"num_heads": 12}, False, MS)
    ref = node_cost("Attention", [x, w, (288,), (B,), past], 0, [(B, 16, 96)], 0, {"num_heads": 12}, False, MS)
    assert ours.unit == "cube" and (ours.flops, ours.block_dim) == (ref.flops, ref.block_dim)
    assert ours.flops > 2.0 * B * 16 * 96 * 288   # the projection plus the attention core
    assert cube_dtype("QAttention", ["uint8", "int8", "float32", "float32", "float32"], {}) == "int8"


# --- QEmbedLayerNormalization ----------------------------------------------------------------------

HID, VOCAB = 32, 50


def _q8(dtype: Any, *shape: int) -> np.ndarray:
    return _u8(*shape).view(dtype)


def _qembed_inputs(dtype: Any, segment: bool = True, mask: np.ndarray | None = None,
                   b: int = 3, s: int = 7) -> list[np.ndarray | None]:
    scale = lambda: np.array(RNG.random() * 0.04 + 0.005, np.float32)  # noqa: E731
    zp = lambda: np.array(RNG.integers(100, 156), np.uint8).view(dtype)  # noqa: E731
    seg = [RNG.integers(0, 2, (b, s)).astype(np.int32), _q8(dtype, 2, HID), scale(), zp()] if segment \
        else [None] * 4
    return [RNG.integers(0, VOCAB, (b, s)).astype(np.int32), seg[0], _q8(dtype, VOCAB, HID), _q8(dtype, 16, HID),
            seg[1], _q8(dtype, HID), _q8(dtype, HID), mask, scale(), scale(), seg[2], scale(), scale(),
            zp(), zp(), seg[3], zp(), zp()]


def _check_qembed(inputs: list, **attrs: Any) -> list[np.ndarray]:
    """Bit-exact with onnxruntime (values, dtypes, shapes) and statically typed at compile time."""
    model = one_node("QEmbedLayerNormalization", inputs, 2, **attrs)
    ours, ref = run_ours(model, inputs), run_ort(model, inputs)
    for o, r in zip(ours, ref):
        assert (o.shape, o.dtype) == (r.shape, r.dtype)
        np.testing.assert_array_equal(o, r)
    _check_types(model, ours)
    return ours


MASK = np.array([[1, 1, 1, 0, 0, 0, 0], [1, 0, 1, 1, 0, 1, 1], [1, 1, 1, 1, 1, 1, 2]], np.int32)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("segment", [True, False])
@pytest.mark.parametrize("mask", [None, MASK])
def test_qembed_layer_norm(dtype, segment, mask):
    """mask_index_out counts each row's ones (a 2 does not count), zeros without a mask."""
    _check_qembed(_qembed_inputs(dtype, segment, mask), epsilon=1e-12)


def test_qembed_layer_norm_default_epsilon():
    _check_qembed(_qembed_inputs(np.uint8, True, MASK))


@pytest.mark.parametrize("change,why", [({0: np.full((3, 7), VOCAB, np.int32)}, "input_ids outside"),
                                        ({0: np.zeros((3, 17), np.int32)}, "positions outside"),
                                        ({4: None}, "segment_ids and segment_embedding")])
def test_qembed_layer_norm_refusals(change, why):
    ins = _qembed_inputs(np.uint8)
    if 0 in change:
        ins[1] = np.zeros(change[0].shape, np.int32)
    ins = [change.get(i, x) for i, x in enumerate(ins)]
    with pytest.raises(UnsupportedOpError, match=f"QEmbedLayerNormalization.*{why}"):
        run_ours(one_node("QEmbedLayerNormalization", ins, 2), ins)


def test_qembed_layer_norm_cost_counts_gathered_rows_not_tables():
    """Vector work on B·S rows per table: a bigger vocabulary costs nothing more."""
    ins = [(4, 128), (4, 128), (30522, 384), (512, 384), (2, 384), (384,), (384,), (4, 128)] + [()] * 10
    small = [(4, 128), (4, 128), (100, 384)] + ins[3:]
    cost = node_cost("QEmbedLayerNormalization", ins, 12_000_000, [(4, 128, 384), (4,)], 4 * 128 * 384 * 4 + 16,
                     {}, False, MS)
    assert cost.unit == "vector"
    assert cost == node_cost("QEmbedLayerNormalization", small, 50_000, [(4, 128, 384), (4,)],
                             4 * 128 * 384 * 4 + 16, {}, False, MS)
    assert 4 * 128 * 384 * 10 <= cost.flops <= 4 * 128 * 384 * 20
    assert cost.bytes < 12_000_000 / 2


def test_shape_rules_leave_unknown_inputs_unknown():
    """A rule that cannot tell (a missing num_heads) gives an unknown type, not an error."""
    from graphexec.kernels.custom import lookup_custom

    spec = lookup_custom("QAttention", MS)
    assert spec is not None and callable(spec.shape)
    t = TensorType(np.dtype(np.float32), (1,))
    assert spec.shape(TensorType(np.dtype(np.uint8), (1, 2, 8)), TensorType(np.dtype(np.int8), (8, 24)), t, t, t) \
        == [TensorType()]


# --- QLinearWhere (what ORT's static quantizer writes for a quantized BERT's Where) ---------------

def _where_inputs(dtype: Any, x_shape: tuple, y_shape: tuple, cond_shape: tuple,
                  same_as_z: bool = False) -> list[np.ndarray]:
    zp = lambda v: np.array(v, np.uint8).view(dtype)  # noqa: E731
    z = [np.array(0.07, np.float32), zp(110)]
    x = [_q8(dtype, *x_shape), *(z if same_as_z else [np.array(0.05, np.float32), zp(128)])]
    y = [_q8(dtype, *y_shape), np.array(0.11, np.float32), zp(3)]
    return [np.asarray(RNG.random(cond_shape) > 0.5), *x, *y, *z]


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("shapes", [((2, 3, 4), (2, 3, 4), (2, 3, 4)), ((3, 4), (1, 4), (2, 1, 1)),
                                    ((), (5,), (2, 5)), ((4,), (), ())])
@pytest.mark.parametrize("same_as_z", [False, True])
def test_qlinear_where(dtype, shapes, same_as_z):
    """Bit-exact with onnxruntime, broadcasting condition, X and Y; X already at Z's parameters is copied."""
    ins = _where_inputs(dtype, *shapes, same_as_z=same_as_z)
    model = one_node("QLinearWhere", ins)
    ours, ref = run_ours(model, ins)[0], run_ort(model, ins)[0]
    assert (ours.shape, ours.dtype) == (ref.shape, ref.dtype)
    np.testing.assert_array_equal(ours, ref)
    _check_types(model, [ours])


def test_qlinear_where_refuses_mixed_zero_point_types():
    ins = _where_inputs(np.uint8, (3,), (3,), (3,))
    ins[6] = np.array(3, np.int8)
    with pytest.raises(UnsupportedOpError, match="QLinearWhere.*zero point int8"):
        run_ours(one_node("QLinearWhere", ins), ins)
