"""The tensor calls PyTorch code makes most, print with values, and torch's type promotion."""

from __future__ import annotations

import numpy as np
import pytest

import graphexec.npu as npu
from graphexec.errors import AclError

A = np.arange(6, dtype=np.float32).reshape(2, 3) / 4 - 0.5


def _x():
    return npu.tensor(A)


CALLS = {   # call on the device tensor -> what numpy gives for the same values
    "x.sum()": (lambda x: x.sum(), lambda a: a.sum()),
    "x.sum(1)": (lambda x: x.sum(1), lambda a: a.sum(1)),
    "x.sum(dim=0, keepdim=True)": (lambda x: x.sum(dim=0, keepdim=True), lambda a: a.sum(0, keepdims=True)),
    "x.mean()": (lambda x: x.mean(), lambda a: a.mean()),
    "x.mean(-1)": (lambda x: x.mean(-1), lambda a: a.mean(-1)),
    "x.max()": (lambda x: x.max(), lambda a: a.max()),
    "x.max(1).values": (lambda x: x.max(1).values, lambda a: a.max(1)),
    "x.max(1).indices": (lambda x: x.max(1).indices, lambda a: a.argmax(1)),
    "x.argmax()": (lambda x: x.argmax(), lambda a: a.argmax()),
    "x.T": (lambda x: x.T, lambda a: a.T),
    "x.t()": (lambda x: x.t(), lambda a: a.T),
    "x.transpose(0, 1)": (lambda x: x.transpose(0, 1), lambda a: a.T),
    "x.permute(1, 0)": (lambda x: x.permute(1, 0), lambda a: a.T),
    "x.unsqueeze(0)": (lambda x: x.unsqueeze(0), lambda a: a[None]),
    "x.flatten()": (lambda x: x.flatten(), lambda a: a.ravel()),
    "x.view(3, 2)": (lambda x: x.view(3, 2), lambda a: a.reshape(3, 2)),
    "x.half()": (lambda x: x.half(), lambda a: a.astype(np.float16)),
    "x.float()": (lambda x: x.half().float(), lambda a: a.astype(np.float16).astype(np.float32)),
    "x.long()": (lambda x: (x * 4).long(), lambda a: (a * 4).astype(np.int64)),
    "x.exp()": (lambda x: x.exp(), np.exp),
    "x.sigmoid()": (lambda x: x.sigmoid(), lambda a: 1 / (1 + np.exp(-a))),
    "x.tanh()": (lambda x: x.tanh(), np.tanh),
    "x.abs().sqrt()": (lambda x: x.abs().sqrt(), lambda a: np.sqrt(np.abs(a))),
    "x.softmax(-1)": (lambda x: x.softmax(-1), lambda a: np.exp(a) / np.exp(a).sum(-1, keepdims=True)),
    "x.softmax(dim=0)": (lambda x: x.softmax(dim=0), lambda a: np.exp(a) / np.exp(a).sum(0, keepdims=True)),
    "x.clamp(-0.25, 0.25)": (lambda x: x.clamp(-0.25, 0.25), lambda a: np.clip(a, -0.25, 0.25)),
    "npu.cat": (lambda x: npu.cat([x, x], dim=1), lambda a: np.concatenate([a, a], 1)),
    "npu.stack": (lambda x: npu.stack([x, x]), lambda a: np.stack([a, a])),
    "npu.matmul": (lambda x: npu.matmul(x, x.T), lambda a: a @ a.T),
    "npu.where": (lambda x: npu.where(x > 0, x, 0.0), lambda a: np.where(a > 0, a, 0)),
}


@pytest.mark.parametrize("name", list(CALLS))
def test_common_calls_match_numpy(name):
    call, want = CALLS[name]
    out = call(_x())
    assert out.is_npu
    expected = np.asarray(want(A))
    assert out.shape == expected.shape and out.dtype == expected.dtype, name
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-3 if out.dtype == np.float16 else 1e-6, atol=1e-6)


def test_print_shows_the_values_as_torch_does():
    x = npu.tensor([[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]])
    assert repr(x) == "tensor([[0., 1., 2.],\n        [3., 4., 5.]], device='npu:0')"
    assert str(x.exp()[0]) == "tensor([1.0000, 2.7183, 7.3891], device='npu:0')"
    assert repr(npu.tensor([1, 2], dtype=np.int32).cpu()) == "tensor([1, 2], dtype=int32)"
    assert repr(npu.arange(3)) == "tensor([0, 1, 2], device='npu:0')"


PROMOTION = [   # torch's result dtype for each mix
    (np.int32, "x + 2.5", np.float32), (np.int32, "x * 2", np.int32), (np.int32, "x / 2", np.float32),
    (np.int64, "x / x", np.float32), (np.float16, "x + 2.5", np.float16), (np.float16, "x * 3", np.float16),
    (np.bool_, "x + 1", np.int64), (np.bool_, "x + 1.5", np.float32), (np.int32, "2.5 - x", np.float32),
    (np.int32, "x < 2.5", np.bool_), (np.int32, "x + x.half()", np.float16), (np.int32, "x + x.long()", np.int64),
    (np.float16, "x + x.float()", np.float32), (np.int32, "x.mean()", np.float32), (np.int32, "x.sum()", np.int64),
]


@pytest.mark.parametrize("dtype,expr,result", PROMOTION)
def test_python_scalars_follow_torchs_promotion(dtype, expr, result):
    out = eval(expr, {"x": npu.tensor(np.array([1, 2, 3]).astype(dtype))})
    assert out.dtype == np.dtype(result), expr
    a = np.array([1, 2, 3]).astype(dtype).astype(np.float64)
    want = eval(expr.replace("x.half()", "x").replace("x.long()", "x").replace("x.float()", "x"), {"x": a})
    np.testing.assert_allclose(np.asarray(out.numpy(), dtype=np.float64), want, rtol=1e-3)


ARRAYS = [   # numbers in a list, tuple or array promote as the tensor of them would, at the call
    (np.float32, "x + [2, 4, 6]", np.float32), (np.float32, "x * (1, 2, 3)", np.float32),
    (np.float32, "x - np.array([1, 2, 3])", np.float32), (np.int32, "x + [1, 2, 3]", np.int64),
    (np.int32, "x + [0.5, 0.5, 0.5]", np.float32), (np.int32, "[1, 2, 3] - x", np.int64),
    (np.float16, "x < [1, 2, 3]", np.bool_), (np.float32, "x + np.array([1, 2, 3], np.float64)", np.float64),
]


@pytest.mark.parametrize("dtype,expr,result", ARRAYS)
def test_arrays_of_numbers_are_cast_at_the_call(dtype, expr, result):
    """``x + [2, 4, 6]`` on a float32 tensor used to reach the kernel as float32 + int64 and fail
    later, at the next synchronize (507015); it is float32 now, as torch's tensors promote."""
    x = npu.tensor(np.array([1, 2, 3]).astype(dtype))
    out = eval(expr, {"x": x, "np": np})
    npu.synchronize()
    assert out.dtype == np.dtype(result), expr
    want = eval(expr, {"x": np.array([1, 2, 3]).astype(np.float64), "np": np})
    np.testing.assert_allclose(np.asarray(out.numpy(), dtype=np.float64), want, rtol=1e-3)


@pytest.mark.parametrize("bad", [[object()], ["a"], [[1], [2, 3]]])
def test_arrays_no_card_holds_are_refused_at_the_call(bad):
    with pytest.raises(AclError, match=r"^ACL_ERROR_INVALID_PARAM \(100000\): Add: an operand must be"):
        npu.ones(3) + bad
    npu.synchronize()
