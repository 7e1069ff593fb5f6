"""Pooling kernels against onnx's reference, and a naive loop where the reference departs from the spec."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

import graphexec.kernels.pool  # noqa: F401  (registers the pooling kernels)
from graphexec.kernels.registry import Unsupported
from kernel_oracle import check_kernel, run_ours

RNG = np.random.default_rng(1)


def rand(*shape: int, dtype=np.float32) -> np.ndarray:
    return RNG.standard_normal(shape).astype(dtype)


COMMON = [
    {"kernel_shape": [3, 3]},
    {"kernel_shape": [3, 2], "strides": [2, 2], "pads": [1, 0, 1, 1]},
    {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1},
    {"kernel_shape": [3, 3], "strides": [3, 3], "pads": [1, 1, 1, 1], "ceil_mode": 1},
    {"kernel_shape": [2, 3], "strides": [2, 1], "auto_pad": "SAME_UPPER"},
    {"kernel_shape": [3, 3], "auto_pad": "VALID", "strides": [2, 2]},
    {"kernel_shape": [2, 2], "auto_pad": "SAME_LOWER"},
]
DILATED = [
    {"kernel_shape": [2, 2], "dilations": [2, 2], "strides": [1, 2], "pads": [1, 1, 1, 1]},
    {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1, "pads": [1, 1, 1, 1], "dilations": [2, 1]},
]


@pytest.mark.parametrize("attrs", COMMON + DILATED)
def test_max_pool(attrs):
    check_kernel("MaxPool", [rand(2, 3, 9, 10)], attrs, opset=12)


@pytest.mark.parametrize("attrs", COMMON + DILATED)
@pytest.mark.parametrize("include", [0, 1])
def test_average_pool(attrs, include):
    check_kernel("AveragePool", [rand(2, 3, 9, 10)], {**attrs, "count_include_pad": include}, opset=19)


@pytest.mark.parametrize("op,opset", [("MaxPool", 8), ("MaxPool", 22), ("AveragePool", 7), ("AveragePool", 11)])
def test_pool_1d_3d_and_opsets(op, opset):
    check_kernel(op, [rand(2, 3, 9)], {"kernel_shape": [3], "strides": [2], "pads": [1, 1]}, opset=opset)
    check_kernel(op, [rand(1, 2, 5, 6, 4)], {"kernel_shape": [2, 3, 2], "strides": [2, 1, 1],
                                            "pads": [1, 0, 0, 0, 1, 1]}, opset=opset)


def test_max_pool_3d_unit_strides():
    """The reference fails on 3-d MaxPool with unit strides and asymmetric pads; use the naive loop."""
    x = rand(1, 2, 5, 6, 4)
    (y,) = run_ours("MaxPool", [x], {"kernel_shape": [2, 3, 2], "pads": [1, 0, 0, 0, 1, 1]}, 12)
    np.testing.assert_allclose(y, naive_pool(x, [2, 3, 2], [1, 1, 1], [1, 0, 0], [5, 5, 4], "max"), rtol=1e-6)


@pytest.mark.parametrize("attrs", [
    {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "ceil_mode": 1},
    {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "storage_order": 1},
    {"kernel_shape": [2, 2], "dilations": [2, 2], "pads": [1, 1, 1, 1]},
])
def test_max_pool_indices(attrs):
    check_kernel("MaxPool", [rand(2, 3, 9, 10)], attrs, opset=12, num_outputs=2)


@pytest.mark.parametrize("order", [0, 1])
def test_max_pool_indices_3d(order):
    check_kernel("MaxPool", [rand(1, 2, 5, 4, 3)], {"kernel_shape": [2, 2, 2], "strides": [2, 1, 1],
                                                   "storage_order": order}, opset=12, num_outputs=2)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.float16, np.float64])
def test_max_pool_dtypes(dtype):
    x = (RNG.standard_normal((1, 2, 7, 7)) * 40).astype(dtype)
    check_kernel("MaxPool", [x], {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}, opset=12)


def naive_pool(x, kernel, strides, pb, out, kind, dilations=None, p=2):
    """Spec semantics, one output pixel at a time: padding never contributes a value."""
    dilations = dilations or [1] * len(kernel)
    y = np.zeros(x.shape[:2] + tuple(out), dtype=np.float64)
    for n, c in itertools.product(range(x.shape[0]), range(x.shape[1])):
        for o in itertools.product(*(range(v) for v in out)):
            vals = []
            for t in itertools.product(*(range(k) for k in kernel)):
                pos = [oi * s - b + ti * d for oi, s, b, ti, d in zip(o, strides, pb, t, dilations)]
                if all(0 <= q < n_ for q, n_ in zip(pos, x.shape[2:])):
                    vals.append(float(x[(n, c) + tuple(pos)]))
            y[(n, c) + o] = max(vals) if kind == "max" else sum(abs(v) ** p for v in vals) ** (1 / p)
    return y


def test_max_pool_same_lower_strided_follows_spec():
    """out = ceil(in / stride) for SAME_LOWER too (the reference uses floor there)."""
    x = rand(1, 2, 9, 10)
    (y,) = run_ours("MaxPool", [x], {"kernel_shape": [2, 3], "strides": [2, 3], "auto_pad": "SAME_LOWER"}, 12)
    # in (9, 10), stride (2, 3) -> out (5, 4); total pads (1, 2) -> begin (1, 1)
    np.testing.assert_allclose(y, naive_pool(x, [2, 3], [2, 3], [1, 1], [5, 4], "max"), rtol=1e-6)


@pytest.mark.parametrize("attrs", [COMMON[0], COMMON[1], COMMON[4]])
@pytest.mark.parametrize("p", [1, 2, 3])
def test_lp_pool(attrs, p):
    check_kernel("LpPool", [rand(2, 3, 9, 10)], {**attrs, "p": p}, opset=18, rtol=1e-4)


def test_lp_pool_ceil_mode_follows_spec():
    """Windows overhanging the input in ceil mode sum only real elements (the reference rescales them)."""
    x = rand(1, 2, 9, 10)
    (y,) = run_ours("LpPool", [x], {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}, 18)
    np.testing.assert_allclose(y, naive_pool(x, [3, 3], [2, 2], [0, 0], [4, 5], "lp"), rtol=1e-5)


def test_global_pools():
    for opset in (1, 22):
        check_kernel("GlobalAveragePool", [rand(2, 3, 5, 4)], opset=opset)
        check_kernel("GlobalMaxPool", [rand(2, 3, 5, 4)], opset=opset)
        check_kernel("GlobalAveragePool", [rand(2, 3, 7)], opset=opset)
    x = rand(2, 3, 4, 5, 2)
    (y,) = run_ours("GlobalMaxPool", [x], {}, 22)
    np.testing.assert_array_equal(y, x.max(axis=(2, 3, 4), keepdims=True))
    (y,) = run_ours("GlobalLpPool", [x], {"p": 3}, 22)
    np.testing.assert_allclose(y, (np.abs(x.astype(np.float64)) ** 3).sum(axis=(2, 3, 4), keepdims=True) ** (1 / 3),
                               rtol=1e-5)


@pytest.mark.parametrize("op,inputs,attrs,opset,nout", [
    ("AveragePool", [np.ones((1, 1, 4, 4), np.int32)], {"kernel_shape": [2, 2]}, 19, 1),
    ("AveragePool", [rand(1, 1, 4, 4)], {"kernel_shape": [2, 2], "auto_pad": "SAME_UPPER", "ceil_mode": 1}, 19, 1),
    ("MaxPool", [rand(1, 1, 4, 4)], {"kernel_shape": [2, 2], "pads": [2, 2, 2, 2]}, 12, 1),
    ("MaxPool", [np.ones((1, 1, 4, 4), np.int32)], {"kernel_shape": [2, 2]}, 12, 1),
    ("MaxPool", [rand(1, 1, 4, 4)], {"kernel_shape": [3]}, 12, 1),
    ("MaxPool", [rand(1, 1, 4, 4)], {"kernel_shape": [2, 2]}, 7, 2),
    ("GlobalAveragePool", [np.ones((1, 1, 4, 4), np.int64)], {}, 22, 1),
])
def test_pool_unsupported(op, inputs, attrs, opset, nout):
    with pytest.raises(Unsupported):
        run_ours(op, inputs, attrs, opset, nout)


def test_average_pool_divisor_excludes_ceil_overhang():
    x = np.ones((1, 1, 5, 5), np.float32)
    (y,) = run_ours("AveragePool", [x], {"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1,
                                         "count_include_pad": 1}, 19)
    assert y.shape == (1, 1, 3, 3) and math.isclose(float(y.min()), 1.0) and math.isclose(float(y.max()), 1.0)
