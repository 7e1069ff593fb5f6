"""The eager hot path against the plain one: the plan cache (a bounded LRU keyed exactly,
constants by their bits), the inline key against ``plan_key``, and the kernel called
directly against its NodeRunner, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

import graphexec.npu as npu
from graphexec.errors import AclError, DeviceError
from graphexec.kernels.dispatch import NodeRunner
from graphexec.npu import _plan
from graphexec.npu._plan import PLANS, plan_key


@pytest.fixture
def small_cache(monkeypatch):
    monkeypatch.setattr(_plan, "PLAN_CACHE_SIZE", 4)
    PLANS.clear()
    yield
    PLANS.clear()


def test_the_plan_cache_is_a_bounded_lru(small_cache):
    x = npu.randn(3, 3)
    for i in range(10):   # each Python scalar is a plan of its own: the cache used to keep them all
        x * float(i)
    assert len(PLANS) == 4
    hot = plan_key("Add", [x, 0.5], {}, 1)
    x + 0.5
    plan = PLANS[hot]
    for i in range(3):    # three new plans, the hot one used between them
        x * float(100 + i)
        x + 0.5
    assert PLANS[hot] is plan   # a hit is the same plan, and a used plan is kept
    x - 1.0, x - 2.0, x - 3.0, x - 4.0
    assert hot not in PLANS and len(PLANS) == 4   # the least recently used goes
    np.testing.assert_array_equal((x + 0.5).cpu().numpy(), x.cpu().numpy() + np.float32(0.5))


def test_constants_are_keyed_by_their_bits():
    a = np.array([-0.0, 1.0, -2.0], np.float32)
    x = npu.tensor(a)
    for c in (0.0, -0.0, np.float32(0.0), np.float32(-0.0)):   # 0.0 == -0.0: they shared one plan
        got = (x * c).cpu().numpy()
        assert got.tobytes() == (a * np.float32(c)).tobytes(), c
    y = npu.tensor(np.array([-0.0], np.float32))
    for c, sign in ((0.0, False), (-0.0, True)):   # a list constant's items too
        got = npu.ops.run("Add", y, [np.float32(c)]).cpu().numpy()
        assert np.signbit(got).tolist() == [sign], c
    before = len(PLANS)
    for _ in range(3):   # NaN != NaN: each call used to build and keep a plan
        assert np.isnan((x + float("nan")).cpu().numpy()).all()
    assert len(PLANS) == before + 1


def test_the_inline_key_is_plan_key():
    x, y = npu.randn(2, 3), npu.randn(2, 3)
    cases = [[x, 0.5], [2, x], [x, np.float32(3.0)], [x, y], [x, True], [x, np.array([1.0], np.float32)]]
    for args in cases:
        npu.ops.run("Add", *args)   # the device fast path
        assert plan_key("Add", args, {}, 1) in PLANS
    npu.ops.run("Softmax", x, axis=0)
    assert plan_key("Softmax", [x], {"axis": 0}, 1) in PLANS
    before = len(PLANS)
    host = x.cpu()
    for args in cases[:3]:   # the general path (host tensors) finds the same plans
        npu.ops.run("Add", *[host if a is x else a for a in args])

    class Mine(npu.Tensor):
        __slots__ = ()

    mine = Mine(x._arr, x._store)
    for _ in range(2):   # a subclass is a tensor too (not a constant keyed by its identity)
        np.testing.assert_array_equal(npu.ops.run("Add", mine, 0.5).cpu().numpy(), (x + 0.5).cpu().numpy())
    assert len(PLANS) == before


def _cases():
    rng = np.random.default_rng(7)
    f = rng.standard_normal((2, 3, 6, 6)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    m = rng.standard_normal((6, 5)).astype(np.float32)
    i = rng.integers(-9, 9, (4, 5)).astype(np.int32)
    j = rng.integers(1, 5, (4, 5)).astype(np.int32)
    T = npu.tensor
    return [
        ("Add", [T(f), 0.5], {}), ("Sub", [2.0, T(f)], {}), ("Mul", [T(f), T(f)], {}),
        ("Div", [T(i), T(j)], {}), ("Relu", [T(f)], {}), ("MatMul", [T(f), T(m)], {}),
        ("Conv", [T(f), T(w), T(np.arange(4, dtype=np.float32))], {"pads": [1, 1, 1, 1]}),
        ("Clip", [T(f), None, np.float32(0.5)], {}), ("Where", [T(f > 0), T(f), T(-f)], {}),
        ("Gemm", [T(m.T.copy()), T(m), T(np.ones((5,), np.float32))], {"alpha": 0.5}),
        ("Softmax", [T(f)], {"axis": 1}), ("ReduceSum", [T(f)], {"keepdims": 0}),
        ("Pow", [T(f), 2.0], {}), ("Cast", [T(f)], {"to": 7}),
        ("Gather", [T(m), T(np.array([0, 2], np.int64))], {}),
    ]


def _run_all():
    return [npu.ops.run(op, *args, **attrs).cpu().numpy() for op, args, attrs in _cases()]


def test_direct_kernel_calls_are_the_runners_bits(monkeypatch):
    PLANS.clear()
    count = {"runner": 0}
    call = NodeRunner.__call__

    def counted(self, values, out=None):
        count["runner"] += 1
        return call(self, values, out)

    monkeypatch.setattr(NodeRunner, "__call__", counted)
    direct = _run_all()
    assert all(p.direct is not None for p in PLANS.values() if not p.view)
    assert count["runner"] == 0   # every one of these kernels ran without its runner
    PLANS.clear()
    monkeypatch.setattr(_plan, "_direct", lambda *a: None)
    plain = _run_all()
    assert count["runner"] == len(plain)
    for (op, _, _), a, b in zip(_cases(), direct, plain):
        assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes(), op
    PLANS.clear()


def test_a_direct_kernel_that_declines_falls_back_as_the_runner_does():
    x = npu.tensor(np.array([1.0, 2.0], np.float32))
    bad = npu.ops.run("Gather", x, npu.tensor(np.array([5], np.int64)))   # the kernel declines, the reference fails
    assert bad.shape == (1,)
    with pytest.raises(AclError, match="kernel 'Gather' failed: .*Gather failed in the onnx reference fallback: "
                                       "IndexError: index 5 is out of bounds"):
        npu.synchronize()


def test_ops_by_name_are_made_once():
    assert npu.ops.relu is npu.ops.relu and npu.ops.relu.__name__ == "relu"
    assert npu.ops.Relu is not npu.ops.relu
    np.testing.assert_array_equal(npu.ops.relu(npu.tensor([-1.0, 2.0])).cpu().numpy(), [0.0, 2.0])


def test_a_captured_graph_replays_after_its_plans_left_the_cache(small_cache):
    x = npu.randn(4, 4)
    eager = ((x + 0.25) * 0.5).cpu().numpy()
    g = npu.NPUGraph()
    with npu.graph(g):
        y = (x + 0.25) * 0.5
    for i in range(8):   # the capture's two plans are pushed out of a cache of 4
        x - float(i)
    assert len(PLANS) == 4 and plan_key("Add", [x, 0.25], {}, 1) not in PLANS
    g.replay()
    npu.synchronize()
    assert y.cpu().numpy().tobytes() == eager.tobytes()


def test_a_wait_runs_its_kernels_with_warnings_off_once(monkeypatch):
    entered = {"n": 0}

    class Counted(np.errstate):
        def __enter__(self):
            entered["n"] += 1
            return super().__enter__()

    x = npu.randn(4, 4)
    npu.synchronize()
    monkeypatch.setattr(np, "errstate", Counted)
    for _ in range(20):
        x = x / 0.0   # inf and NaN, no RuntimeWarning
    before = np.geterr()
    npu.synchronize()   # the 20 kernels run here: one errstate for the wait, not one per kernel
    assert entered["n"] == 1
    assert np.geterr() == before
    y = x.cpu().numpy()
    assert not np.isfinite(y).any()
    with pytest.warns(RuntimeWarning):   # the caller's numpy warns as before
        np.float32(1.0) / np.zeros(1, np.float32)


def test_a_cached_plan_keeps_the_bytes_of_its_key_not_the_callers_array():
    """An array argument is a constant of the plan: changing the caller's array afterwards
    changes neither that plan (reused under the old bytes' key) nor a launch in flight."""
    x = npu.zeros(1, device="npu:0")
    a = np.array([1.0], np.float32)
    assert (x + a).numpy().tolist() == [1.0]
    a[0] = 2.0
    assert (x + a).numpy().tolist() == [2.0]
    assert (x + np.array([1.0], np.float32)).numpy().tolist() == [1.0]   # the first plan, its own bytes
    c = np.array([5.0], np.float32)
    y = x + c
    c[0] = 7.0
    assert y.numpy().tolist() == [5.0]


def test_a_list_argument_is_snapshotted_too():
    x = npu.zeros(2, device="npu:0")
    shape = [2, 1]
    assert npu.ops.run("Reshape", x, shape).shape == (2, 1)
    shape[0], shape[1] = 1, 2
    assert npu.ops.run("Reshape", x, shape).shape == (1, 2)
    assert npu.ops.run("Reshape", x, [2, 1]).shape == (2, 1)


def test_the_operators_fast_path_is_run_op_bit_for_bit():
    """``ops.binary`` (the operators' common cases) against ``npu.ops.run``: the same plan
    key (plan_key's), no extra plans, and the same bits; cases it leaves to run_op (host
    tensors, ints, another card's tensor) still work or fail as run_op does."""
    rng = np.random.default_rng(3)
    a = np.concatenate([rng.standard_normal(14), [-0.0, 0.0]]).astype(np.float32)
    x, y = npu.tensor(a), npu.tensor(a[::-1].copy())
    cases = [(lambda: x + 0.5, "Add", [x, 0.5]), (lambda: 0.5 + x, "Add", [0.5, x]),
             (lambda: x - -0.0, "Sub", [x, -0.0]), (lambda: 2.0 - x, "Sub", [2.0, x]),
             (lambda: x * y, "Mul", [x, y]), (lambda: x / float("nan"), "Div", [x, float("nan")]),
             (lambda: 1.0 / x, "Div", [1.0, x]), (lambda: x * 3, "Mul", [x, 3])]
    for fn, op, args in cases:
        got = fn()
        assert plan_key(op, args, {}, 1) in PLANS, op
        before = len(PLANS)
        want = npu.ops.run(op, *args)
        assert len(PLANS) == before   # run_op found the plan the operator made
        assert got.numpy().tobytes() == want.numpy().tobytes(), (op, args)
    host = x.cpu()
    assert ((host + 0.5).numpy().tobytes() == (x + 0.5).numpy().tobytes())
    npu.init(device_count=2)
    p, q = npu.tensor(a), npu.tensor(a, device="npu:1")
    with pytest.raises(DeviceError, match="inputs on npu:0 and npu:1"):
        p * q
