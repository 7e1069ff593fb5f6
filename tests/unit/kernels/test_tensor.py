"""Shape and data-movement kernels against onnx's reference evaluator (see kernel_oracle)."""

from __future__ import annotations

import numpy as np
import pytest
from kernel_oracle import check_kernel, run_ours
from onnx import helper

from graphexec.kernels.registry import Unsupported

RNG = np.random.default_rng(2)
X = RNG.standard_normal((2, 3, 4)).astype(np.float32)


def i64(*v):
    return np.array(v, dtype=np.int64)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_concat(axis):
    check_kernel("Concat", [X, X * 2, X[:1] if axis == 0 else X], {"axis": axis} if axis else {"axis": 0})


@pytest.mark.parametrize("opset,inputs,attrs,n", [
    (11, [], {"axis": 1, "split": [1, 2]}, 2),
    (11, [], {"axis": -1}, 2),
    (13, [i64(1, 3)], {"axis": 2}, 2),
    (13, [i64(0, 3, 0)], {"axis": 1}, 3),
    (18, [], {"axis": 2, "num_outputs": 3}, 3),  # 5 -> 2, 2, 1
    (18, [], {"axis": 1, "num_outputs": 2}, 2),  # 3 -> 2, 1
    (18, [i64(2, 2)], {"axis": 2}, 2),
])
def test_split(opset, inputs, attrs, n):
    x = np.arange(2 * 3 * 5, dtype=np.float32).reshape(2, 3, 5) if attrs.get("num_outputs") == 3 else X
    check_kernel("Split", [x] + inputs, attrs, opset=opset, num_outputs=n)


def test_split_indivisible_without_sizes_is_unsupported():
    with pytest.raises(Unsupported):
        run_ours("Split", [X], {"axis": 1}, 13, num_outputs=2)


@pytest.mark.parametrize("starts,ends,axes,steps", [
    ([0, 1], [2, 3], None, None),
    ([1], [1000], [2], None),
    ([-1], [-1000], [2], [-1]),
    ([-2, 10], [0, -10**18], [1, 2], [-1, -2]),
    ([2**63 - 1], [0], [1], [-1]),
    ([0], [2**63 - 1], [-1], [3]),
    ([-100], [100], [0], None),
    ([3], [1], [2], [1]),
])
def test_slice(starts, ends, axes, steps):
    inputs = [X, i64(*starts), i64(*ends)] + ([i64(*axes)] if axes is not None else [])
    if steps is not None:
        inputs += [i64(*steps)] if axes is not None else [None, i64(*steps)]
    check_kernel("Slice", inputs, opset=13)


def test_slice_attributes_before_opset_10():
    check_kernel("Slice", [X], {"starts": [0, -3], "ends": [1, 100], "axes": [0, 2]}, opset=9)


@pytest.mark.parametrize("idx,axis", [(i64(0, 2, -1), 1), (i64(1), 0), (np.array([[0, 3], [-4, 1]], np.int32), -1)])
def test_gather(idx, axis):
    check_kernel("Gather", [X, idx], {"axis": axis})


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_gather_elements(axis):
    idx = RNG.integers(-X.shape[axis], X.shape[axis], size=X.shape).astype(np.int64)
    check_kernel("GatherElements", [X, idx], {"axis": axis})


def test_out_of_range_index_is_unsupported():
    with pytest.raises(Unsupported):
        run_ours("Gather", [X, i64(5)], {"axis": 1}, 13)


@pytest.mark.parametrize("perm", [None, [0, 2, 1], [2, 0, 1]])
def test_transpose(perm):
    check_kernel("Transpose", [X], {} if perm is None else {"perm": perm})


@pytest.mark.parametrize("shape,allowzero", [
    ((4, 6), 0), ((0, -1), 0), ((-1,), 0), ((2, 0, 2, 2), 0), ((3, 2, 4), 1),
])
def test_reshape(shape, allowzero):
    check_kernel("Reshape", [X, i64(*shape)], {"allowzero": allowzero}, opset=14)


def test_reshape_allowzero_keeps_zero():
    check_kernel("Reshape", [np.zeros((0, 3), np.float32), i64(3, 0)], {"allowzero": 1}, opset=14)


@pytest.mark.parametrize("axis", [0, 1, 2, 3, -1, -3])
def test_flatten(axis):
    check_kernel("Flatten", [X], {"axis": axis})


@pytest.mark.parametrize("opset", [11, 13])
def test_squeeze_unsqueeze(opset):
    x = X.reshape(2, 1, 3, 1, 4)
    if opset < 13:
        check_kernel("Squeeze", [x], {"axes": [1, -2]}, opset=opset)
        check_kernel("Squeeze", [x], {}, opset=opset)
        check_kernel("Unsqueeze", [X], {"axes": [0, -1, 2]}, opset=opset)
    else:
        check_kernel("Squeeze", [x, i64(-2, 1)], opset=opset)
        check_kernel("Squeeze", [x], opset=opset)
        check_kernel("Unsqueeze", [X, i64(4, 0)], opset=opset)


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
def test_pad_modes(mode):
    check_kernel("Pad", [X, i64(0, 1, 2, 1, 2, 1)], {"mode": mode}, opset=13)


def test_pad_value_axes_and_old_opsets():
    check_kernel("Pad", [X, i64(1, 2, 0, 3), np.array(1.5, np.float32), i64(-1, 0)], opset=18)
    check_kernel("Pad", [X], {"pads": [0, 1, 0, 0, 2, 1], "value": -2.0}, opset=2)
    check_kernel("Pad", [np.arange(6, dtype=np.int32).reshape(2, 3), i64(1, 1, 1, 1), np.array(7, np.int32)],
                 opset=13)


def test_pad_negative_crops_in_constant_mode():
    out = run_ours("Pad", [X, i64(0, -1, 1, 0, 0, -2)], {}, 13)[0]
    np.testing.assert_array_equal(out, np.pad(X[:, 1:, :-2], [(0, 0), (0, 0), (1, 0)]))
    with pytest.raises(Unsupported):
        run_ours("Pad", [X, i64(0, -1, 1, 0, 0, -2)], {"mode": "edge"}, 13)


@pytest.mark.parametrize("attrs", [{}, {"start": 1}, {"end": -1}, {"start": -2, "end": 10}, {"start": 2, "end": 1}])
def test_shape_size(attrs):
    check_kernel("Shape", [X], attrs, opset=15)
    check_kernel("Size", [X])


@pytest.mark.parametrize("shape", [(2, 3, 4), (3, 1, 1, 4), (1,), (2, 1, 1)])
def test_expand(shape):
    check_kernel("Expand", [X[:, :1, :], i64(*shape)])


def test_tile_identity():
    check_kernel("Tile", [X, i64(2, 1, 3)])
    check_kernel("Identity", [X])


@pytest.mark.parametrize("value", [None, np.array([7], np.int32), np.array([1.5], np.float64)])
def test_constant_of_shape(value):
    attrs = {} if value is None else {"value": helper.make_tensor("v", 6 if value.dtype == np.int32 else 11,
                                                                  [1], value.tolist())}
    check_kernel("ConstantOfShape", [i64(2, 3)], attrs)
    check_kernel("ConstantOfShape", [np.zeros(0, np.int64)], attrs)


@pytest.mark.parametrize("start,limit,delta,dtype", [
    (0, 10, 3, np.int32), (10, 4, -2, np.int64), (1.0, 2.0, 0.3, np.float32), (5.0, 1.0, -0.5, np.float64),
    (0, 0, 1, np.int32), (0.0, 5.0, 0.5, np.float16),
])
def test_range(start, limit, delta, dtype):
    check_kernel("Range", [np.array(start, dtype), np.array(limit, dtype), np.array(delta, dtype)], opset=27)


@pytest.mark.parametrize("upper", [0, 1])
@pytest.mark.parametrize("k", [None, 0, 2, -1, -5])
def test_trilu(upper, k):
    inputs = [X] + ([] if k is None else [np.array(k, np.int64)])
    check_kernel("Trilu", inputs, {"upper": upper})


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_onehot(axis):
    idx = np.array([[1, 9, -2], [0, -12, 3]], dtype=np.int64)
    check_kernel("OneHot", [idx, np.array(10, np.int64), np.float32([-1, 4])], {"axis": axis}, opset=11)
    check_kernel("OneHot", [idx.astype(np.float32), np.array(10.0, np.float32), np.int32([0, 1])], opset=11)


@pytest.mark.parametrize("eq,shapes", [
    ("ij,jk->ik", [(3, 4), (4, 5)]), ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]), ("ii->i", [(3, 3)]),
    ("ij->", [(3, 4)]), ("i,i", [(5,), (5,)]), ("...ii->...i", [(2, 3, 3)]), ("ij, jk", [(3, 4), (4, 2)]),
    ("Ab,bA", [(2, 3), (3, 2)]),
])
def test_einsum(eq, shapes):
    check_kernel("Einsum", [RNG.standard_normal(s).astype(np.float32) for s in shapes], {"equation": eq})


@pytest.mark.parametrize("exclusive", [0, 1])
@pytest.mark.parametrize("reverse", [0, 1])
@pytest.mark.parametrize("axis", [0, -1])
def test_cumsum(exclusive, reverse, axis):
    check_kernel("CumSum", [X, np.array(axis, np.int64)], {"exclusive": exclusive, "reverse": reverse})
    check_kernel("CumSum", [np.arange(12, dtype=np.int32).reshape(3, 4), np.array(axis, np.int32)],
                 {"exclusive": exclusive, "reverse": reverse})


@pytest.mark.parametrize("largest", [0, 1])
@pytest.mark.parametrize("axis", [-1, 0, 1])
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.uint8])
def test_topk_ties(largest, axis, dtype):
    x = RNG.integers(0, 3, size=(4, 5, 3)).astype(dtype)  # many ties
    check_kernel("TopK", [x, i64(3)], {"largest": largest, "axis": axis}, opset=11, num_outputs=2)


def test_topk_nan_and_old_opset():
    x = np.float32([[1, np.nan, 3, 3, -np.inf, np.nan]])
    for largest in (0, 1):
        check_kernel("TopK", [x, i64(6)], {"largest": largest}, opset=11, num_outputs=2)
    check_kernel("TopK", [X], {"k": 2, "axis": 1}, opset=1, num_outputs=2)


def test_nonzero():
    check_kernel("NonZero", [np.array([[1, 0, 3], [0, 0, 2]], np.int32)])
    check_kernel("NonZero", [np.zeros((2, 3), bool)])


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_scatter_elements(reduction, axis):
    shape = [2, 3, 4]
    shape[axis] = 5
    idx = RNG.integers(-X.shape[axis], X.shape[axis], size=shape).astype(np.int64)
    if reduction == "none":  # distinct targets along the axis so the result is well defined
        idx = np.argsort(RNG.random(X.shape), axis=axis)[tuple(slice(0, 2) if a == axis % 3 else slice(None)
                                                               for a in range(3))]
    upd = RNG.standard_normal(idx.shape).astype(np.float32)
    check_kernel("ScatterElements", [X, idx, upd], {"axis": axis, "reduction": reduction}, opset=18)


def test_scatter_elements_duplicates_last_wins():
    data = np.zeros(4, np.float32)
    check_kernel("ScatterElements", [data, i64(1, 1, 1), np.float32([1, 2, 3])], opset=18)


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
@pytest.mark.parametrize("k", [1, 2, 3])
def test_scatter_nd(reduction, k):
    idx = np.stack([RNG.integers(0, d, size=5) for d in X.shape[:k]], axis=-1).astype(np.int64)
    if reduction == "none":
        idx = np.unique(idx, axis=0)
    upd = RNG.standard_normal(idx.shape[:-1] + X.shape[k:]).astype(np.float32)
    check_kernel("ScatterND", [X, idx, upd], {"reduction": reduction}, opset=18)


@pytest.mark.parametrize("batch_dims,idx", [
    (0, i64(1, 2)), (0, np.array([[0, 1, 2], [1, -1, 0]], np.int64)), (0, np.array([[1], [0]], np.int64)),
    (1, np.array([[2], [0]], np.int64)), (1, np.array([[[0, 1], [2, 3]], [[1, 1], [0, 0]]], np.int64)),
])
def test_gather_nd(batch_dims, idx):
    check_kernel("GatherND", [X, idx], {"batch_dims": batch_dims})


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_depth_space(mode):
    x = np.arange(2 * 8 * 2 * 3, dtype=np.float32).reshape(2, 8, 2, 3)
    check_kernel("DepthToSpace", [x], {"blocksize": 2, "mode": mode}, opset=13)
    y = np.arange(2 * 2 * 4 * 6, dtype=np.float32).reshape(2, 2, 4, 6)
    check_kernel("SpaceToDepth", [y], {"blocksize": 2, "mode": mode}, opset=28)


@pytest.mark.parametrize("op,inputs,attrs,opset", [
    ("Concat", [np.array(1.0), np.array(2.0)], {"axis": 0}, 13),
    ("Trilu", [np.float32([1, 2])], {}, 14),
    ("Einsum", [np.array(["a"], dtype=object)], {"equation": "i->i"}, 12),
    ("TopK", [X, i64(9)], {}, 11),
    ("OneHot", [np.float32([0.5]), np.array(3), np.float32([0, 1])], {}, 11),
])
def test_unsupported(op, inputs, attrs, opset):
    with pytest.raises(Unsupported):
        run_ours(op, inputs, attrs, opset, num_outputs=2 if op == "TopK" else 1)
