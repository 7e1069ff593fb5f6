"""Reduction kernels against onnx's reference evaluator (see kernel_oracle)."""

from __future__ import annotations

import numpy as np
import pytest
from kernel_oracle import check_kernel, run_ours

import graphexec.kernels.reduce  # noqa: F401  (registers the reductions)
from graphexec.kernels.registry import Unsupported

RNG = np.random.default_rng(1)
X = RNG.standard_normal((2, 3, 4)).astype(np.float32)
XPOS = (RNG.random((2, 3, 4)) + 0.5).astype(np.float32)
FLOAT_OPS = ["ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
             "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"]
AXES = [None, [1], [-1], [0, 2], [2, 0], [0, 1, 2]]


def _data(op, dtype=np.float32):
    return (XPOS if op == "ReduceLogSum" else X).astype(dtype)


def _check(op, x, axes, attrs, opset):
    """Axes go in as an input from the op's switch-over opset, as an attribute before it."""
    axes_input = opset >= (13 if op == "ReduceSum" else 18)
    attrs = dict(attrs)
    if axes is not None and not axes_input:
        attrs["axes"] = axes
    inputs = [x] + ([np.array(axes, dtype=np.int64)] if axes is not None and axes_input else [])
    check_kernel(op, inputs, attrs, opset=opset, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("op", FLOAT_OPS)
@pytest.mark.parametrize("axes", AXES)
@pytest.mark.parametrize("keepdims", [0, 1])
def test_axes_as_input(op, axes, keepdims):
    _check(op, _data(op), axes, {"keepdims": keepdims}, 18)


@pytest.mark.parametrize("op", FLOAT_OPS)
@pytest.mark.parametrize("axes", [None, [1], [0, -1]])
def test_axes_as_attribute(op, axes):
    _check(op, _data(op), axes, {"keepdims": 0}, 11 if op == "ReduceSum" else 13)


@pytest.mark.parametrize("op", FLOAT_OPS)
def test_noop_with_empty_axes(op):
    x = _data(op)
    check_kernel(op, [x, np.array([], dtype=np.int64)], {"noop_with_empty_axes": 1}, opset=18)
    check_kernel(op, [x], {"noop_with_empty_axes": 1}, opset=18)
    check_kernel(op, [x, np.array([], dtype=np.int64)], {"noop_with_empty_axes": 0}, opset=18)


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
                                "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare", "ReduceL2"])
@pytest.mark.parametrize("keepdims", [0, 1])
def test_empty_set(op, keepdims):
    x = np.zeros((2, 0, 4), dtype=np.float32)
    check_kernel(op, [x, np.array([1], dtype=np.int64)], {"keepdims": keepdims}, opset=18)


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceSumSquare"])
@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8])
def test_integer_dtypes_kept(op, dtype):
    x = RNG.integers(0, 5, size=(3, 4)).astype(dtype)
    if op == "ReduceSumSquare" and dtype != np.int64:  # the reference promotes to int64; ONNX keeps T
        out = run_ours(op, [x, np.array([1], np.int64)], {"keepdims": 0}, 18)[0]
        assert out.dtype == dtype
        np.testing.assert_array_equal(out, (x.astype(np.int64) ** 2).sum(axis=1))
    else:
        _check(op, x, [1], {"keepdims": 0}, 18)


def test_integer_mean_truncates_toward_zero():
    x = np.array([[-3, -4], [3, 4], [-1, 0]], dtype=np.int32)
    out = run_ours("ReduceMean", [x, np.array([1], np.int64)], {"keepdims": 0}, 18)[0]
    np.testing.assert_array_equal(out, [-3, 3, 0])
    assert out.dtype == np.int32


def test_bool_and_empty_min_max():
    b = np.array([[True, False], [False, False]])
    for op in ("ReduceMax", "ReduceMin"):
        check_kernel(op, [b, np.array([1], np.int64)], {"keepdims": 0}, opset=20)
    check_kernel("ReduceMax", [np.zeros((0, 3), np.int32), np.array([0], np.int64)], {}, opset=20)
    check_kernel("ReduceMax", [np.zeros((0, 3), bool), np.array([0], np.int64)], {}, opset=20)


def test_float16_and_nan_and_infinities():
    check_kernel("ReduceSum", [X.astype(np.float16)], {"keepdims": 0}, opset=13, rtol=2e-3, atol=2e-3)
    check_kernel("ReduceMax", [np.float32([[1, np.nan], [2, 3]])], {"keepdims": 0}, opset=18)
    lse = np.float32([[1, -np.inf], [-np.inf, -np.inf], [2, 3], [np.inf, 1]])
    out = run_ours("ReduceLogSumExp", [lse, np.array([1], np.int64)], {"keepdims": 0}, 18)[0]
    # log(exp(-inf) + exp(-inf)) = log(0) = -inf (the reference's max-shift yields nan here)
    np.testing.assert_allclose(out, [1, -np.inf, np.logaddexp(2, 3), np.inf], rtol=1e-6)


def test_zero_dim_result_is_array():
    out = run_ours("ReduceSum", [X], {"keepdims": 0}, 13)[0]
    assert isinstance(out, np.ndarray) and out.shape == () and out.dtype == np.float32
    check_kernel("ReduceMax", [np.array(2.5, np.float32)], {"keepdims": 0}, opset=18)  # rank 0 is valid


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("keepdims", [0, 1])
@pytest.mark.parametrize("last", [0, 1])
def test_arg(op, axis, keepdims, last):
    x = RNG.integers(0, 3, size=(3, 4, 5)).astype(np.float32)  # many ties
    check_kernel(op, [x], {"axis": axis, "keepdims": keepdims, "select_last_index": last}, opset=13)


@pytest.mark.parametrize("op,x,opset", [
    ("ReduceLogSum", np.ones((2, 2), np.int32), 13),
    ("ReduceLogSumExp", np.ones((2, 2), np.int64), 13),
    ("ReduceSum", np.array([["a"]], dtype=object), 13),
    ("ReduceMean", np.zeros((0, 2), np.int32), 13),
    ("ArgMax", np.zeros((0, 2), np.float32), 13),
])
def test_unsupported(op, x, opset):
    with pytest.raises(Unsupported):
        run_ours(op, [x], {"axes": [0]} if op.startswith("Reduce") else {}, opset)
