"""nn kernels against onnx's reference, or the spec formula where the reference departs from it."""

from __future__ import annotations

import math

import numpy as np
import pytest

import graphexec.kernels.nn  # noqa: F401  (registers the nn kernels)
from graphexec.kernels.registry import Unsupported
from kernel_oracle import check_kernel, run_ours

RNG = np.random.default_rng(3)


def rand(*shape: int, dtype=np.float32) -> np.ndarray:
    return RNG.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("a,b", [((3, 4), (4, 5)), ((2, 1, 3, 4), (5, 4, 6)), ((4,), (2, 4, 6)),
                                 ((2, 3, 4), (4,)), ((4,), (4,))])
@pytest.mark.parametrize("opset", [1, 9, 13])
def test_matmul(a, b, opset):
    check_kernel("MatMul", [rand(*a), rand(*b)], opset=opset, rtol=1e-5, atol=1e-5)


def test_matmul_int_and_half():
    a, b = np.arange(12, dtype=np.int64).reshape(3, 4), np.arange(8, dtype=np.int64).reshape(4, 2)
    check_kernel("MatMul", [a, b], opset=13)
    check_kernel("MatMul", [rand(3, 4, dtype=np.float16), rand(4, 5, dtype=np.float16)], opset=13, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("opset", [7, 9, 11, 13])
@pytest.mark.parametrize("attrs,cshape", [({}, (5,)), ({"transA": 1}, (3, 1)), ({"transB": 1, "alpha": 0.5}, (3, 5)),
                                          ({"transA": 1, "transB": 1, "beta": 2.0}, (1, 5)), ({"beta": 0.0}, (5,))])
def test_gemm(opset, attrs, cshape):
    a = rand(4, 3) if attrs.get("transA") else rand(3, 4)
    b = rand(5, 4) if attrs.get("transB") else rand(4, 5)
    check_kernel("Gemm", [a, b, rand(*cshape)], attrs, opset=opset, rtol=1e-5, atol=1e-5)


def test_gemm_without_c_and_old_broadcast():
    check_kernel("Gemm", [rand(3, 4), rand(4, 5)], {}, opset=13, rtol=1e-5, atol=1e-5)
    check_kernel("Gemm", [rand(3, 4), rand(4, 5), rand(3, 5)], {"broadcast": 0}, opset=6, rtol=1e-5, atol=1e-5)
    check_kernel("Gemm", [rand(3, 4), rand(4, 5), rand(5)], {"broadcast": 1}, opset=6, rtol=1e-5, atol=1e-5)


def bn_formula(x, s, b, m, v, eps=1e-5):
    shape = (-1,) + (1,) * (x.ndim - 2)
    r = lambda t: t.astype(np.float64).reshape(shape)  # noqa: E731
    return (x - r(m)) / np.sqrt(r(v) + eps) * r(s) + r(b)


@pytest.mark.parametrize("xshape", [(2, 3), (2, 3, 4), (2, 3, 4, 5), (1, 3, 2, 2, 2)])
@pytest.mark.parametrize("opset", [7, 9, 14, 15])
def test_batch_norm_inference(xshape, opset):
    """The reference uses batch statistics at opsets 7-13; the oracle is the spec's inference formula."""
    x, s, b, m, v = rand(*xshape), rand(3), rand(3), rand(3), np.abs(rand(3)) + 0.1
    (y,) = run_ours("BatchNormalization", [x, s, b, m, v], {"epsilon": 1e-3}, opset)
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, bn_formula(x, s, b, m, v, 1e-3), rtol=1e-5, atol=1e-6)
    if opset >= 14:
        check_kernel("BatchNormalization", [x, s, b, m, v], {"epsilon": 1e-3}, opset=opset)


def test_batch_norm_old_is_test():
    args = [rand(2, 3, 4), rand(3), rand(3), rand(3), np.abs(rand(3))]
    check_kernel("BatchNormalization", args, {"is_test": 1}, opset=6)


def softmax_2d(x, axis, log=False):
    m = x.reshape(int(np.prod(x.shape[:axis])), -1).astype(np.float64)
    e = np.exp(m - m.max(axis=1, keepdims=True))
    y = e / e.sum(axis=1, keepdims=True)
    return (np.log(y) if log else y).reshape(x.shape)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("axis", [0, 1, 2, -1, -2])
def test_softmax(op, axis):
    x = rand(2, 3, 4) * 5
    check_kernel(op, [x], {"axis": axis}, opset=13)
    for opset in (1, 11):  # coerced to 2-d at axis (the reference does not implement this)
        (y,) = run_ours(op, [x], {"axis": axis}, opset)
        np.testing.assert_allclose(y, softmax_2d(x, axis % 3, op == "LogSoftmax"), rtol=1e-5, atol=1e-6)


def test_softmax_defaults_and_large_values():
    x = rand(2, 3, 4)
    (y,) = run_ours("Softmax", [x], {}, 11)
    np.testing.assert_allclose(y, softmax_2d(x, 1), rtol=1e-5)
    check_kernel("Softmax", [x], {}, opset=13)
    (y,) = run_ours("LogSoftmax", [np.array([[1e4, 1e4 + 1, -1e4]], np.float32)], {}, 13)
    np.testing.assert_allclose(y, [[-1 - math.log1p(math.e ** -1), -math.log1p(math.e ** -1), -2e4 - 1 - math.log1p(math.e ** -1)]],
                               rtol=1e-6)


@pytest.mark.parametrize("axis", [-1, 0, 1, 2, -2])
def test_layer_norm(axis):
    x = rand(2, 3, 4)
    shape = x.shape[axis:]
    check_kernel("LayerNormalization", [x, rand(*shape), rand(*shape)], {"axis": axis, "epsilon": 1e-3},
                 opset=17, num_outputs=3, rtol=1e-5, atol=1e-5)
    check_kernel("LayerNormalization", [x, rand(*shape)], {"axis": axis}, opset=17, rtol=1e-5, atol=1e-5)


def lrn_loop(x, size, alpha=1e-4, beta=0.75, bias=1.0):
    c = x.shape[1]
    y = np.empty(x.shape, np.float64)
    for i in range(c):
        lo, hi = max(0, i - (size - 1) // 2), min(c, i + math.ceil((size - 1) / 2) + 1)
        y[:, i] = x[:, i] / (bias + alpha / size * (x[:, lo:hi].astype(np.float64) ** 2).sum(axis=1)) ** beta
    return y


@pytest.mark.parametrize("size,attrs", [(3, {}), (5, {"alpha": 0.01, "beta": 0.5, "bias": 2.0}), (4, {"alpha": 0.1})])
def test_lrn(size, attrs):
    """The reference loops over the batch instead of the channels; the oracle is a channel loop."""
    x = rand(2, 7, 4, 5) * 3
    (y,) = run_ours("LRN", [x], {"size": size, **attrs}, 13)
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, lrn_loop(x, size, **attrs), rtol=1e-5, atol=1e-6)


def test_dropout_inference():
    x = rand(2, 3)
    check_kernel("Dropout", [x], {"ratio": 0.3}, opset=9)
    for opset in (7, 9, 10):   # the mask before 12 as the reference gives it (it ran as the fallback)
        check_kernel("Dropout", [x], {"ratio": 0.3}, opset=opset, num_outputs=2)
    np.testing.assert_array_equal(run_ours("Dropout", [x], {"is_test": 1}, 6)[0], x)
    for inputs in ([x], [x, np.array(0.2, np.float32)], [x, None, np.array(False)],
                   [x, np.array(0.0, np.float32), np.array(True)]):
        y, mask = run_ours("Dropout", inputs, {}, 13, num_outputs=2)
        np.testing.assert_array_equal(y, x)
        assert mask.dtype == np.bool_ and mask.all()


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_on_a_scalar(dtype, approximate):
    check_kernel("Gelu", [np.array(0.7, dtype)], {"approximate": approximate}, opset=20, rtol=1e-6, atol=1e-7)


def test_gelu():
    x = rand(200) * 4
    # the reference evaluates in float32 and loses digits to cancellation for negative x
    check_kernel("Gelu", [x], {}, opset=20, rtol=1e-3, atol=1e-6)
    check_kernel("Gelu", [x], {"approximate": "tanh"}, opset=20, rtol=1e-3, atol=1e-6)
    tail = np.linspace(-12, 12, 241).astype(np.float32).astype(np.float64)
    exact = np.array([0.5 * v * math.erfc(-v / math.sqrt(2)) for v in tail])
    (y64,) = run_ours("Gelu", [tail], {}, 20)
    np.testing.assert_allclose(y64, exact, rtol=1e-13)
    (y32,) = run_ours("Gelu", [tail.astype(np.float32)], {}, 20)
    np.testing.assert_allclose(y32, exact, rtol=5e-7, atol=0)  # relative accuracy even in the far tail


@pytest.mark.parametrize("op,inputs,attrs,opset,nout", [
    ("BatchNormalization", [rand(2, 3), rand(3), rand(3), rand(3), rand(3)], {"training_mode": 1}, 15, 1),
    ("BatchNormalization", [rand(2, 3), rand(3), rand(3), rand(3), rand(3)], {}, 9, 5),
    ("BatchNormalization", [rand(2, 3), rand(3), rand(3), rand(3), rand(3)], {}, 6, 1),
    ("BatchNormalization", [rand(2, 3), rand(3), rand(3), rand(3), rand(3)], {"spatial": 0}, 7, 1),
    ("Dropout", [rand(2, 3), np.array(0.5, np.float32), np.array(True)], {}, 13, 2),
    ("Dropout", [rand(2, 3)], {}, 6, 1),
    ("LayerNormalization", [rand(2, 3), rand(3)], {"stash_type": 0}, 17, 1),
    ("LayerNormalization", [rand(2, 3, dtype=np.float16), rand(3, dtype=np.float16)], {}, 17, 3),
    ("Gelu", [rand(3)], {"approximate": "erf"}, 20, 1),
    ("Gemm", [np.ones((2, 2), np.int32), np.ones((2, 2), np.int32)], {"alpha": 2.0}, 13, 1),
    ("MatMul", [np.ones((2, 2), np.bool_), np.ones((2, 2), np.bool_)], {}, 13, 1),
    ("Softmax", [np.ones((2, 2), np.int32)], {}, 13, 1),
])
def test_nn_unsupported(op, inputs, attrs, opset, nout):
    with pytest.raises(Unsupported):
        run_ours(op, inputs, attrs, opset, nout)
