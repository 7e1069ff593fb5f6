"""Eager ops: numpy's answers, graph mode's bits, views, host ops, and bad input."""

from __future__ import annotations

import numpy as np
import pytest

import graphexec as gx
import graphexec.npu as npu
from graphexec.errors import AclError, DeviceError, GraphError, GraphExecError


def test_operators_match_numpy():
    a, b = np.random.default_rng(1).standard_normal((2, 3, 4)).astype(np.float32), \
        np.random.default_rng(2).standard_normal((3, 4)).astype(np.float32)
    x, y = npu.tensor(a), npu.tensor(b)
    np.testing.assert_array_equal((x + y).numpy(), a + b)
    np.testing.assert_array_equal((x - y).numpy(), a - b)
    np.testing.assert_array_equal((x * y).numpy(), a * b)
    np.testing.assert_array_equal((x / y).numpy(), a / b)
    np.testing.assert_array_equal((2 - x).numpy(), np.float32(2) - a)
    np.testing.assert_allclose((x @ npu.tensor(b.T.copy())).numpy(), a @ b.T, rtol=1e-5)
    np.testing.assert_array_equal((x > y).numpy(), a > b)
    np.testing.assert_array_equal((-x).numpy(), -a)


def test_ops_by_name_run_the_registry_kernels():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 3, 8, 8)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    y = npu.ops.conv(npu.tensor(x), npu.tensor(w), pads=[1, 1, 1, 1])
    assert y.shape == (1, 4, 8, 8) and y.device == "npu:0"
    ref = gx.Session(_one_node("Conv", [x, w], pads=[1, 1, 1, 1])).run({"x0": x, "x1": w}).outputs
    assert y.numpy().tobytes() == next(iter(ref.values())).tobytes()
    np.testing.assert_array_equal(npu.ops.relu(npu.tensor(x)).numpy(), np.maximum(x, 0))
    vals, idx = npu.ops.top_k(npu.tensor(x.reshape(-1)), np.array([5], np.int64), outputs=2)
    np.testing.assert_array_equal(vals.numpy(), np.sort(x.reshape(-1))[::-1][:5])
    assert idx.dtype == np.int64


def _one_node(op, arrays, **attrs):
    b = gx.GraphBuilder("ref")
    ins = [b.input(f"x{i}", a.dtype, list(a.shape)) for i, a in enumerate(arrays)]
    b.output(b.op(op, *ins, **attrs))
    return b.build()


def test_eager_chain_is_bit_identical_to_graph_mode():
    rng = np.random.default_rng(4)
    a = rng.standard_normal((8, 16)).astype(np.float32)
    w = rng.standard_normal((16, 16)).astype(np.float32)
    b = gx.GraphBuilder("chain")
    x = b.input("x", np.float32, [8, 16])
    h = x
    for _ in range(5):
        h = b.Tanh(b.Add(b.MatMul(h, b.constant(w, "w" + str(_))), b.constant(np.float32(0.5))))
    h = b.Softmax(h, axis=-1)
    b.output(h)
    graph_out = gx.Session(b.build(), streams=2).run({"x": a}).outputs
    t, wt = npu.tensor(a), npu.tensor(w)
    for _ in range(5):
        t = npu.ops.tanh(t @ wt + 0.5)
    t = npu.ops.softmax(t, axis=-1)
    assert t.numpy().tobytes() == next(iter(graph_out.values())).tobytes()


def test_ops_sized_by_their_values_wait_then_run_on_the_device():
    a = np.array([[1, 0, 2], [0, 3, 0]], np.float32)
    x = npu.tensor(a) * 1.0
    nz = npu.ops.non_zero(x)
    assert nz.device == "npu:0" and nz.dtype == np.int64
    np.testing.assert_array_equal(nz.numpy(), np.stack(np.nonzero(a)))
    assert any(t["name"] == "NonZero" and t["kind"] == "kernel" for t in npu.timeline())
    with npu.graph(npu.NPUGraph()):
        with pytest.raises(GraphExecError, match="cannot be captured"):
            npu.ops.non_zero(x)


def test_indexing_is_a_view_of_the_same_bytes():
    x = npu.tensor(np.arange(12, dtype=np.float32).reshape(3, 4))
    row = x[1]
    row.copy_(npu.tensor(np.full(4, 7.0, np.float32)))
    np.testing.assert_array_equal(x.numpy()[1], np.full(4, 7.0))
    col = x[:, 2]
    np.testing.assert_array_equal((col * 2).numpy(), x.numpy()[:, 2] * 2)
    x[0] = 5.0
    assert x.numpy()[0].tolist() == [5.0] * 4
    r = x.reshape(4, 3)
    assert r.shape == (4, 3) and r._store is x._store


def test_host_tensors_compute_at_once():
    x = npu.tensor([[1.0, -2.0]], device="cpu")
    y = npu.ops.relu(x) + 1
    assert y.device == "cpu" and y.numpy().tolist() == [[2.0, 1.0]]
    assert npu.from_numpy(np.ones(3, np.float32)).npu().cpu().numpy().tolist() == [1.0, 1.0, 1.0]


def test_shapes_that_do_not_broadcast_are_one_line():
    with pytest.raises(GraphError) as e:
        npu.ones(3, 4) + npu.ones(5)
    assert "\n" not in str(e.value) and "npu.ops.add" in str(e.value)


def test_a_tensor_of_another_device_needs_to():
    npu.init(system="atlas800-910")
    a, b = npu.ones(4), npu.ones(4, device="npu:1")
    with pytest.raises(DeviceError) as e:
        a + b
    assert "npu:0 and npu:1" in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(DeviceError):
        a + npu.ones(4, device="cpu")
    assert (a + b.to("npu:0")).numpy().tolist() == [2.0] * 4


def test_stream_and_tensor_after_device_reset_are_refused():
    s = npu.Stream()
    x = npu.ones(4)
    npu.reset_device(0)
    with pytest.raises(AclError) as e:
        npu.set_stream(s)
    assert "npu:0 was reset" in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(AclError):
        x + 1
    assert (npu.ones(2) + 1).numpy().tolist() == [2.0, 2.0]   # the card opens afresh


def test_bad_devices_and_sizes():
    with pytest.raises(DeviceError, match="npu:3 does not exist"):
        npu.ones(2, device="npu:3")
    with pytest.raises(DeviceError, match="is not a device"):
        npu.ones(2, device="gpu")
    with pytest.raises(GraphExecError, match="ints >= 0"):
        npu.zeros(2, -1)
