"""Conv / ConvTranspose kernels against onnx's reference (or a per-group oracle where it is wrong)."""

from __future__ import annotations

import numpy as np
import pytest

import graphexec.kernels.conv  # noqa: F401  (registers Conv, ConvTranspose)
from graphexec.kernels.registry import Unsupported
from kernel_oracle import check_kernel, run_ours, run_reference

RNG = np.random.default_rng(0)


def rand(*shape: int, dtype=np.float32) -> np.ndarray:
    return RNG.standard_normal(shape).astype(dtype)


CONV_CASES = [
    ((2, 4, 9, 8), (6, 4, 3, 3), True, {"pads": [1, 0, 2, 1], "strides": [2, 1]}),
    ((1, 3, 7, 7), (5, 3, 3, 3), False, {}),
    ((2, 4, 9, 8), (6, 2, 3, 2), False, {"group": 2, "dilations": [2, 1], "auto_pad": "SAME_UPPER"}),
    ((2, 4, 9, 8), (8, 1, 3, 3), True, {"group": 4, "strides": [2, 2], "auto_pad": "SAME_LOWER"}),
    ((1, 6, 10, 10), (6, 1, 3, 3), True, {"group": 6, "pads": [1, 1, 1, 1]}),
    ((1, 4, 8, 8), (4, 1, 5, 5), False, {"group": 4, "dilations": [2, 2], "pads": [4, 4, 4, 4]}),
    ((1, 4, 9, 9), (4, 4, 3, 3), False, {"auto_pad": "VALID", "strides": [3, 2]}),
    ((2, 4, 9), (8, 4, 1), True, {"strides": [2]}),
    ((2, 3, 11), (4, 3, 3), False, {"pads": [2, 1], "dilations": [3]}),
    ((1, 3, 5, 6, 7), (4, 3, 2, 3, 2), True, {"pads": [1, 1, 1, 0, 0, 0], "dilations": [1, 2, 1]}),
    ((1, 2, 5, 5, 5), (2, 1, 3, 3, 3), False, {"group": 2, "strides": [2, 1, 2], "auto_pad": "SAME_UPPER"}),
    ((1, 8, 6, 6), (16, 8, 1, 1), True, {}),
    ((1, 8, 7, 7), (16, 8, 1, 1), False, {"strides": [2, 2]}),
    ((1, 3, 6, 6), (2, 3, 3, 3), False, {"kernel_shape": [3, 3], "pads": [0, 0, 0, 0]}),
]


@pytest.mark.parametrize("xs,ws,bias,attrs", CONV_CASES)
@pytest.mark.parametrize("opset", [11, 22])
def test_conv_matches_reference(xs, ws, bias, attrs, opset):
    inputs = [rand(*xs), rand(*ws)] + ([rand(ws[0])] if bias else [])
    check_kernel("Conv", inputs, attrs, opset=opset, rtol=1e-4, atol=1e-5)


def test_conv_float64_and_float16():
    check_kernel("Conv", [rand(1, 3, 6, 6, dtype=np.float64), rand(4, 3, 3, 3, dtype=np.float64)],
                 {"pads": [1, 1, 1, 1]}, rtol=1e-10, atol=1e-12)
    check_kernel("Conv", [rand(1, 3, 6, 6, dtype=np.float16), rand(4, 3, 3, 3, dtype=np.float16)],
                 {"pads": [1, 1, 1, 1]}, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("inputs,attrs", [
    ([np.ones((1, 2, 4, 4), np.int32), np.ones((2, 2, 3, 3), np.int32)], {}),
    ([rand(1, 3, 6, 6), rand(2, 3, 3, 3)], {"kernel_shape": [2, 2]}),
    ([rand(1, 3, 6, 6), rand(2, 3, 3, 3)], {"pads": [-1, 0, 0, 0]}),
    ([rand(1, 3, 6, 6), rand(2, 3, 3, 3)], {"auto_pad": "BOGUS"}),
])
def test_conv_unsupported(inputs, attrs):
    with pytest.raises(Unsupported):
        run_ours("Conv", inputs, attrs, 22)


TRANSPOSE_CASES = [
    ((2, 3, 5, 4), (3, 4, 3, 3), True, {"strides": [2, 2], "pads": [1, 0, 1, 2], "output_padding": [1, 0]}),
    ((1, 2, 3, 3), (2, 3, 3, 3), False, {}),
    ((2, 3, 5, 4), (3, 4, 3, 2), False, {"strides": [2, 1], "dilations": [2, 2], "output_shape": [12, 5],
                                         "auto_pad": "SAME_UPPER"}),
    ((2, 3, 5, 4), (3, 4, 3, 2), False, {"strides": [2, 1], "output_shape": [10, 4], "auto_pad": "SAME_LOWER"}),
    ((2, 3, 5, 4), (3, 4, 3, 2), False, {"strides": [3, 2], "auto_pad": "SAME_UPPER"}),
    ((2, 3, 5, 4), (3, 4, 3, 2), False, {"strides": [3, 2], "auto_pad": "SAME_LOWER"}),
    ((1, 3, 4, 4), (3, 2, 2, 2), True, {"strides": [2, 2], "auto_pad": "VALID"}),
    ((1, 2, 6), (2, 3, 3), True, {"strides": [2], "pads": [1, 2]}),
    ((1, 2, 3, 4, 3), (2, 2, 2, 3, 2), False, {"strides": [1, 2, 2], "pads": [0, 1, 0, 0, 1, 1]}),
]


@pytest.mark.parametrize("xs,ws,bias,attrs", TRANSPOSE_CASES)
def test_conv_transpose_matches_reference(xs, ws, bias, attrs):
    inputs = [rand(*xs), rand(*ws)] + ([rand(ws[1])] if bias else [])
    check_kernel("ConvTranspose", inputs, attrs, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("attrs", [{"strides": [2, 2]}, {"strides": [3, 1], "pads": [1, 0, 0, 1], "dilations": [1, 2]}])
def test_conv_transpose_groups(attrs):
    """The reference mishandles groups; the oracle runs it once per group and concatenates."""
    x, w, b = rand(2, 4, 5, 4), rand(4, 3, 3, 2), rand(6)
    (y,) = run_ours("ConvTranspose", [x, w, b], {**attrs, "group": 2}, 22)
    parts = [run_reference("ConvTranspose", [x[:, 2 * g:2 * g + 2], w[2 * g:2 * g + 2], b[3 * g:3 * g + 3]],
                           attrs, 22)[0] for g in range(2)]
    np.testing.assert_allclose(y, np.concatenate(parts, axis=1), rtol=1e-4, atol=1e-5)


def test_conv_transpose_output_shape_past_full_result_appends_zeros():
    x, w = rand(1, 1, 3, 3), rand(1, 2, 3, 3)
    (y,) = run_ours("ConvTranspose", [x, w], {"strides": [3, 2], "output_shape": [10, 8]}, 22)
    (full,) = run_ours("ConvTranspose", [x, w], {"strides": [3, 2]}, 22)
    assert y.shape == (1, 2, 10, 8)
    np.testing.assert_allclose(y[:, :, :9, :7], full, rtol=1e-6)
    assert not y[:, :, 9:].any() and not y[:, :, :, 7:].any()


@pytest.mark.parametrize("attrs", [
    {"strides": [3, 2], "output_shape": [10, 8], "auto_pad": "SAME_UPPER"},  # negative begin pad
    {"strides": [3, 3], "auto_pad": "SAME_UPPER"},  # SAME beyond the full result (ORT clamps)
    {"output_shape": [5, 5], "pads": [1, 1, 1, 1]},
    {"pads": [-1, 0, 0, 0]},
])
def test_conv_transpose_unsupported(attrs):
    with pytest.raises(Unsupported):
        run_ours("ConvTranspose", [rand(1, 1, 3, 3), rand(1, 2, 2, 2)], attrs, 22)
