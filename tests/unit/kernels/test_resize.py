"""Resize kernel against onnx's reference over modes, coordinate transforms, scales/sizes and opsets."""

from __future__ import annotations

import numpy as np
import pytest

import graphexec.kernels.resize  # noqa: F401  (registers Resize)
from graphexec.kernels.registry import Unsupported
from kernel_oracle import check_kernel, run_ours

RNG = np.random.default_rng(2)
X = RNG.standard_normal((2, 3, 5, 7)).astype(np.float32)
EMPTY = np.array([], np.float32)
COORDS = ["half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric"]
SCALES = [[1, 1, 0.6, 0.7], [1, 1, 2.5, 1.3], [1, 1, 2, 3], [1, 1, 1 / 5, 1 / 7]]


def check(inputs, attrs, opset):
    check_kernel("Resize", inputs, attrs, opset=opset, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("coord", COORDS)
@pytest.mark.parametrize("rounding", ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"])
@pytest.mark.parametrize("opset", [11, 13, 19])
def test_nearest_scales(coord, rounding, opset):
    for sc in SCALES:
        check([X, EMPTY, np.array(sc, np.float32)],
              {"mode": "nearest", "coordinate_transformation_mode": coord, "nearest_mode": rounding}, opset)


@pytest.mark.parametrize("mode", ["linear", "cubic"])
@pytest.mark.parametrize("coord", COORDS + ["half_pixel_symmetric"])
def test_linear_cubic_scales_and_sizes(mode, coord):
    for sc in SCALES:
        check([X, EMPTY, np.array(sc, np.float32)], {"mode": mode, "coordinate_transformation_mode": coord}, 19)
    for sizes in ([2, 3, 9, 4], [2, 3, 3, 11]):
        check([X, EMPTY, EMPTY, np.array(sizes, np.int64)], {"mode": mode, "coordinate_transformation_mode": coord}, 19)


@pytest.mark.parametrize("opset", [11, 13, 18])
def test_cubic_attributes(opset):
    attrs = {"mode": "cubic", "cubic_coeff_a": -0.5, "exclude_outside": 1}
    check([X, EMPTY, np.array([1, 1, 0.8, 1.7], np.float32)], attrs, opset)
    check([X, EMPTY, np.array([1, 1, 2, 2], np.float32)], {**attrs, "coordinate_transformation_mode": "asymmetric"},
          opset)


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
def test_tf_crop_and_resize(mode):
    roi = np.array([0, 0, 0.2, -0.1, 1, 1, 0.9, 1.3], np.float32)
    attrs = {"mode": mode, "coordinate_transformation_mode": "tf_crop_and_resize", "extrapolation_value": 5.0}
    check([X, roi, EMPTY, np.array([2, 3, 4, 9], np.int64)], attrs, 13)
    check([X, np.array([0.2, 0.9], np.float32), EMPTY, np.array([4], np.int64)], {**attrs, "axes": [2]}, 19)


def test_axes_and_keep_aspect_ratio():
    for axes in ([2, 3], [3, 2], [3]):
        sc = np.array([2.0, 1.5][:len(axes)], np.float32)
        check([X, EMPTY, sc], {"mode": "linear", "axes": axes}, 18)
    neg, pos = (run_ours("Resize", [X, EMPTY, np.array([2.0], np.float32)], {"axes": [a]}, 18)[0] for a in (-1, 3))
    np.testing.assert_array_equal(neg, pos)
    for policy in ("stretch", "not_larger", "not_smaller"):
        check([X, EMPTY, EMPTY, np.array([8, 8], np.int64)],
              {"mode": "nearest", "axes": [2, 3], "keep_aspect_ratio_policy": policy}, 19)


def test_integer_and_half_inputs():
    xi = (RNG.standard_normal((1, 2, 4, 5)) * 50).astype(np.uint8)
    check([xi, EMPTY, np.array([1, 1, 2, 1.5], np.float32)], {"mode": "nearest"}, 13)
    xh = X.astype(np.float16)
    check_kernel("Resize", [xh, EMPTY, np.array([1, 1, 2, 1.5], np.float32)], {"mode": "linear"}, opset=13,
                 rtol=1e-3, atol=1e-3)


def test_opset10_upsample_is_asymmetric():
    """Resize-10: asymmetric coordinates; nearest upsampling takes the floor."""
    x = np.arange(1, 13, dtype=np.float32).reshape(1, 1, 3, 4)
    (y,) = run_ours("Resize", [x, np.array([1, 1, 2, 1.5], np.float32)], {"mode": "nearest"}, 10)
    rows, cols = np.floor(np.arange(6) / 2).astype(int), np.floor(np.arange(6) / 1.5).astype(int)
    np.testing.assert_array_equal(y, x[:, :, rows][:, :, :, cols])
    (y,) = run_ours("Resize", [x, np.array([1, 1, 2, 1], np.float32)], {"mode": "linear"}, 10)
    np.testing.assert_allclose(y[0, 0, :, 0], [1, 3, 5, 7, 9, 9])


@pytest.mark.parametrize("inputs,attrs,opset", [
    ([X, EMPTY, np.array([1, 1, 0.5, 0.5], np.float32)], {"mode": "linear", "antialias": 1}, 18),
    ([X, EMPTY, np.array([1, 1, 2, 2], np.float32)], {"mode": "nearest", "exclude_outside": 1}, 13),
    ([X.astype(np.uint8), EMPTY, np.array([1, 1, 2, 2], np.float32)], {"mode": "linear"}, 13),
    ([X, EMPTY, np.array([1, 1, 2, 2], np.float32)], {"coordinate_transformation_mode": "half_pixel_symmetric"}, 18),
    ([X, np.array([1, 1, 0.5, 0.5], np.float32)], {"mode": "nearest"}, 10),
    ([X, EMPTY, np.array([1, 1, 2, 2], np.float32), np.array([2, 3, 4, 4], np.int64)], {}, 13),
    ([X, EMPTY, np.array([1, 1, 2, 2], np.float32)], {"mode": "area"}, 13),
    ([X, np.array([0, 0, 0.2, 0.2, 1, 1, 0.8, 0.8], np.float32), np.array([1, 1, 2, 2], np.float32)],
     {"coordinate_transformation_mode": "tf_crop_and_resize"}, 13),
])
def test_resize_unsupported(inputs, attrs, opset):
    with pytest.raises(Unsupported):
        run_ours("Resize", inputs, attrs, opset)
