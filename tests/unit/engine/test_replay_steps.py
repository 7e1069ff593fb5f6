"""Replay steps (``engine/steps.py``) and kernel binds (``KernelDef.bind``) against the
plain path they skip: every step as ``KernelCall.compute`` and ``store``, every kernel
through its NodeRunner. Outputs by bytes, stats and traces must not move."""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import graphexec as gx
from graphexec.engine.feeds import default_feeds
from graphexec.engine.steps import Steps
from graphexec.errors import KernelError
from graphexec.kernels import registry
from graphexec.kernels.dispatch import NodeRunner
from graphexec.kernels.fused import FusedRunner
from graphexec.kernels.quiet import run_quietly
from graphexec.kernels.registry import OpContext, Unsupported

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
MODELS = ["squeezenet", "inception_v1", "shufflenet", "bvlc_alexnet", "densenet121"]


def _bytes(result):
    return {k: (v.dtype, v.shape, v.tobytes()) for k, v in result.outputs.items()}


def _numbers(result):
    return repr(replace(result.stats, compile_s=0.0, host_time_us=0.0)), result.trace


def _runs(graph, feeds_list, **opts):
    opts.setdefault("fusion", False)   # the steps serve NodeRunners; a fused task's runner takes the plain path
    session = gx.Session(graph, **opts)
    return [session.run(f) for f in feeds_list], session


def _plain(monkeypatch):
    """Every step the plain KernelCall's, as before the steps."""
    monkeypatch.setattr(Steps, "_direct", lambda self, i, task, ctx: False)
    monkeypatch.setattr(Steps, "_hold", lambda self, i, ctx: False)


def _same(graph, feeds_list, monkeypatch, **opts):
    fast, session = _runs(graph, feeds_list, **opts)
    with monkeypatch.context() as m:
        _plain(m)
        plain, _ = _runs(graph, feeds_list, **opts)
    for a, b in zip(fast, plain):
        assert _bytes(a) == _bytes(b)
        assert _numbers(a) == _numbers(b)
    return session, fast


@pytest.mark.parametrize("streams", [1, 4])
@pytest.mark.parametrize("name", MODELS)
def test_light_models_replay_as_the_plain_path(name, streams, monkeypatch):
    graph = gx.load(LIGHT / f"light_{name}.onnx")
    feeds = default_feeds(graph)
    rng = np.random.default_rng(7)
    other = {k: rng.standard_normal(v.shape).astype(v.dtype) for k, v in feeds.items()}
    session, _ = _same(graph, [feeds, other, feeds], monkeypatch, streams=streams)
    steps = session.compile(feeds)._steps
    assert any(r is not None for r in steps.runners)
    if name in ("shufflenet", "densenet121"):   # host-fused chains: their runners on values held
        assert any(steps.held)


@pytest.mark.parametrize("name", ["shufflenet", "resnet50"])
def test_fused_light_models_replay_as_the_plain_path(name, monkeypatch):
    """With graph fusion a fused task's runner (its members in order) is stepped like any other."""
    graph = gx.load(LIGHT / f"light_{name}.onnx")
    feeds = default_feeds(graph)
    session, _ = _same(graph, [feeds, feeds], monkeypatch, fusion=True)
    assert session.compiled.graph.meta["fusion"]
    assert any(f is not None for f in session.compiled._steps.fused)   # members called directly


def test_held_steps_go_plain_when_the_views_switch():
    """``_plain_after`` (a run-time allocation's switch) takes held steps too; the runs after
    compute the same bytes through KernelCall.compute."""
    graph = gx.load(LIGHT / "light_shufflenet.onnx")
    feeds = default_feeds(graph)
    session = gx.Session(graph, fusion=False)   # host fusion's held chains are unfused graphs'
    first = session.run(feeds)
    plan = session.compile(feeds)
    steps = plan._steps
    assert any(steps.held)
    steps._plain_after(plan._tape, -1)
    assert not any(steps.held) and all(r is None for r in steps.runners)
    assert _bytes(session.run(feeds)) == _bytes(first)


def _model(nodes, inputs, outputs, inits=()):
    return gx.load(helper.make_model(helper.make_graph(nodes, "g", inputs, outputs, list(inits)),
                                     opset_imports=[helper.make_opsetid("", 17)]))


def _vi(name, dtype, shape):
    return helper.make_tensor_value_info(name, dtype, shape)


ELEMENTWISE = [  # (dtype, shape of a, shape of b): broadcasts, 0-d, a big channel broadcast, ints
    (TensorProto.FLOAT, [4], [4]), (TensorProto.FLOAT, [3, 4], [4]), (TensorProto.FLOAT, [], []),
    (TensorProto.FLOAT, [], [5]), (TensorProto.FLOAT, [2, 3, 1], [1, 1, 4]),
    (TensorProto.FLOAT, [64, 1024], [64, 1]), (TensorProto.INT32, [6], [6]), (TensorProto.INT64, [2, 3], [3]),
    (TensorProto.DOUBLE, [5, 1], [1, 5]),
]


@pytest.mark.parametrize("dtype, sa, sb", ELEMENTWISE)
def test_elementwise_graphs_replay_as_the_plain_path_and_numpy(dtype, sa, sb, monkeypatch):
    """Add, Sub, Mul, Div, then Relu, Neg, Abs, Sqrt/Exp (floats): every bind's case."""
    floats = dtype in (TensorProto.FLOAT, TensorProto.DOUBLE)
    nodes = [helper.make_node(op, ["a", "b"], [f"o{k}"]) for k, op in enumerate(["Add", "Sub", "Mul", "Div"])]
    nodes += [helper.make_node("Relu", ["o0"], ["r"]), helper.make_node("Neg", ["o1"], ["n"]),
              helper.make_node("Abs", ["n"], ["y0"]), helper.make_node("Add", ["r", "y0"], ["y1"])]
    outs = ["y1", "o2", "o3"]
    if floats:
        nodes += [helper.make_node("Abs", ["o2"], ["ab"]), helper.make_node("Sqrt", ["ab"], ["y2"]),
                  helper.make_node("Exp", ["r"], ["y3"])]
        outs += ["y2", "y3"]
    shape = list(np.broadcast_shapes(tuple(sa), tuple(sb)))
    graph = _model(nodes, [_vi("a", dtype, sa), _vi("b", dtype, sb)], [_vi(o, dtype, shape) for o in outs])
    np_dtype = helper.tensor_dtype_to_np_dtype(dtype)
    rng = np.random.default_rng(3)
    feeds = [{"a": (rng.standard_normal(sa) * 10).astype(np_dtype),
              "b": (rng.integers(1, 9, sb) * rng.choice([-1, 1], sb)).astype(np_dtype)} for _ in range(2)]
    _, fast = _same(graph, feeds, monkeypatch, streams=2)
    for result, f in zip(fast, feeds):
        a, b = f["a"], f["b"]
        with np.errstate(all="ignore"):
            r = np.maximum(a + b, 0)
            want = {"y1": r + np.abs(-(a - b)), "o2": a * b}
            if floats:
                want.update(o3=a / b, y2=np.sqrt(np.abs(a * b)), y3=np.exp(r))
        for k, v in want.items():
            np.testing.assert_array_equal(result.outputs[k], np.asarray(v, np_dtype))


def _binds():
    for op in ["Relu", "Neg", "Abs", "Sign", "Sqrt", "Exp", "Tanh", "Add", "Sub", "Mul", "Div"]:
        kdef = registry.lookup_def(op, "", 17)
        assert kdef is not None and kdef.bind is not None
        yield op, kdef


ARRAYS = [np.float32, np.float64, np.int32, np.int64, np.float16, np.bool_]


@pytest.mark.parametrize("op, kdef", list(_binds()), ids=lambda v: v if isinstance(v, str) else "")
def test_a_bind_computes_what_its_kernel_returns(op, kdef):
    """On random arrays of every shape pairing and dtype, into an out that fits or not, the
    bound call's bytes are the kernel's; where it cannot tell, the bind says None."""
    rng = np.random.default_rng(11)
    binary = op in ("Add", "Sub", "Mul", "Div")
    shapes = [((4,), (4,)), ((), ()), ((), (3,)), ((2, 3), (3,)), ((3, 1), (1, 2)), ((64, 1024), (64, 1)),
              ((2,), (3,))] if binary else [((4,),), ((),), ((2, 3, 5),), ((300, 300),)]
    ctx = OpContext(op, {}, 17, 1, op)
    bound = 0
    with run_quietly():
        for dt in ARRAYS:
            for shp in shapes:
                xs = [(rng.standard_normal(s) * 5 + 1).astype(dt) for s in shp]
                try:
                    want = kdef.fn(ctx, *xs)
                except (Unsupported, ValueError):
                    assert kdef.bind(ctx, *xs) is None
                    continue
                for out in (None, np.empty(want.shape, want.dtype), np.empty(want.shape, np.float64),
                            np.empty((7,), want.dtype)):
                    call = kdef.bind(ctx, *xs, out=out)
                    if call is None:
                        continue
                    bound += 1
                    got = call()
                    twin = None if out is None else np.empty_like(out)
                    ref = kdef.fn(ctx, *xs, out=twin)
                    assert type(got) is np.ndarray and (got.dtype, got.shape, got.tobytes()) == \
                        (ref.dtype, ref.shape, ref.tobytes())
                    assert (out is not None and got is out) == (twin is not None and ref is twin)
    assert bound > 10


def _chain(n=4, op="Relu"):
    nodes = [helper.make_node(op, ["x" if i == 0 else f"v{i - 1}"], [f"v{i}"], name=f"r{i}") for i in range(n)]
    return _model(nodes, [_vi("x", TensorProto.FLOAT, [4])], [_vi(f"v{n - 1}", TensorProto.FLOAT, [4])])


@contextmanager
def _relu_fn(fn):
    """Relu's registration with another function (and so no bind) for the block."""
    old = registry.lookup_def("Relu", "", 17)
    assert old is not None
    registry.update("Relu", "", 17, fn=fn)
    try:
        yield
    finally:
        registry.update("Relu", "", 17, fn=old.fn, bind=old.bind)


FEEDS = {"x": np.array([-1.5, 2.0, -0.0, 3.25], np.float32)}


def test_a_kernel_that_turns_to_its_fallback_mid_replay():
    def refuse(ctx, x, out=None):
        raise Unsupported("not this case")

    flips = NodeRunner.flips
    with _relu_fn(refuse):
        session = gx.Session(_chain(), fusion=False)
        first = session.run(FEEDS)
        steps = session.compile(FEEDS)._steps
        assert NodeRunner.flips == flips + 4 and steps.runners == [None] * 4   # each turned, each step plain
        again = session.run(FEEDS)
    for result in (first, again):
        np.testing.assert_array_equal(result.outputs["v3"], np.maximum(FEEDS["x"], 0))


def test_a_fallback_taken_on_another_path_makes_the_step_plain():
    session = gx.Session(_chain(), fusion=False)
    session.run(FEEDS)
    plan = session.compile(FEEDS)
    runner = plan.state.runners[plan._kernels[1].id]
    assert plan._steps.runners[1] is runner
    runner.uses_fallback, NodeRunner.flips = True, NodeRunner.flips + 1   # as recover does
    np.testing.assert_array_equal(session.run(FEEDS).outputs["v3"], np.maximum(FEEDS["x"], 0))
    assert plan._steps.runners[1] is None and plan._steps.runners[0] is not None


@pytest.mark.parametrize("fusion", [False, True])   # a kernel of its own, and a graph-fused group's member
def test_bad_values_are_the_plain_paths_kernel_error(fusion, monkeypatch):
    def bad(ctx, x, out=None):
        raise ValueError("boom")

    messages = []
    with _relu_fn(bad):
        for plain in (False, True):
            with monkeypatch.context() as m:
                if plain:
                    _plain(m)
                with pytest.raises(KernelError) as err:
                    gx.Session(_chain(), fusion=fusion).run(FEEDS)
                messages.append(str(err.value))
    assert messages[0] == messages[1] and "kernel Relu failed on inputs (4,): boom" in messages[0]


def test_bad_values_leave_the_step_direct_for_the_next_run():
    def picky(ctx, x, out=None):
        if x[0] < 0:
            raise ValueError("negative first")
        return np.maximum(x, 0, out=out)

    with _relu_fn(picky):
        session = gx.Session(_chain(), fusion=False)
        with pytest.raises(KernelError, match="negative first"):
            session.run(FEEDS)
        good = {"x": np.abs(FEEDS["x"])}
        np.testing.assert_array_equal(session.run(good).outputs["v3"], good["x"])
        assert all(r is not None for r in session.compile(FEEDS)._steps.runners)


def test_a_run_time_allocation_sends_later_steps_down_the_plain_path(monkeypatch):
    """A Relu that returns float64 for its float32 value: the store allocates at run time and
    the run's views go private; the Neg and Abs after it, had they kept the planned view of
    the Relu's value, would read bytes nobody wrote."""
    def wide(ctx, x, out=None):
        return np.maximum(x, 0).astype(np.float64) + 1

    nodes = [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Neg", ["a"], ["z"]),
             helper.make_node("Abs", ["z"], ["w"])]
    graph = _model(nodes, [_vi("x", TensorProto.FLOAT, [4])], [_vi(n, TensorProto.FLOAT, [4]) for n in "azw"])
    with _relu_fn(wide):
        session, fast = _same(graph, [FEEDS, FEEDS], monkeypatch)
        steps = session.compile(FEEDS)._steps
        assert steps.runners[0] is not None and steps.runners[1:] == [None, None]   # the Relu began before
    for result in fast:
        assert result.outputs["w"].dtype == np.float64
        np.testing.assert_array_equal(result.outputs["w"], np.maximum(FEEDS["x"], 0) + 1)


def test_a_direct_kernel_that_returns_a_new_array_is_stored():
    def fresh(ctx, x, out=None):
        return np.maximum(x, 0) * np.float32(2)

    with _relu_fn(fresh):
        session = gx.Session(_chain(), fusion=False)
        for _ in range(2):
            np.testing.assert_array_equal(session.run(FEEDS).outputs["v3"], np.maximum(FEEDS["x"], 0) * 16)
        steps = session.compile(FEEDS)._steps
        assert all(r is not None for r in steps.runners)   # still direct: only the end stored


def test_a_new_function_drops_the_old_bind():
    old = registry.lookup_def("Relu", "", 17)
    assert old is not None and old.bind is not None
    try:
        assert registry.update("Relu", "", 17, fn=lambda ctx, x, out=None: x).bind is None
        assert registry.update("Relu", "", 17, check=None).bind is None
    finally:
        registry.update("Relu", "", 17, fn=old.fn, bind=old.bind)
    assert registry.lookup_def("Relu", "", 17) == old


def test_a_fused_chain_calls_its_members_directly():
    """Graph fusion makes the Relu chain one task; its step calls the members' kernels with
    their arguments bound once, and computes what the plain path does."""
    session = gx.Session(_chain(), fusion=True)
    first = session.run(FEEDS)
    plan = session.compile(FEEDS)
    (fused,) = plan._steps.fused
    assert fused is plan.state.runners[plan._kernels[0].id] and len(fused.members) == 4
    for result in (first, session.run(FEEDS)):
        np.testing.assert_array_equal(result.outputs["v3"], np.maximum(FEEDS["x"], 0))


def test_a_fused_member_that_turns_to_its_fallback_makes_the_step_plain(monkeypatch):
    def refuse(ctx, x, out=None):
        raise Unsupported("not this case")

    # the members' kernels called directly (``FusedRunner.bound``), not their binds chained (a chain of
    # binds calls no kernel, and a bind serves only the cases its kernel does: test_decode_steps)
    monkeypatch.setattr(FusedRunner, "chained", lambda self, values, out=None: None)
    session = gx.Session(_chain(), fusion=True)
    session.run(FEEDS)
    plan = session.compile(FEEDS)
    assert plan._steps.held == [True]
    with _relu_fn(refuse):
        for m in plan._steps.fused[0].members:   # a new function: the runners look it up again
            m.fn, m.bind = refuse, None
        for _ in range(2):   # the first run recovers in the step; the second finds the step plain
            np.testing.assert_array_equal(session.run(FEEDS).outputs["v3"], np.maximum(FEEDS["x"], 0))
    assert plan._steps.held == [False] and plan._steps.fused == [None]
