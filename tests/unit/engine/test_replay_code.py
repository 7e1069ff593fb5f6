"""The generated replay programs (``engine/replay_code.py``) against the loop they unroll
(``Steps._walk``) and the plain path: the same calls in the same order, the same bytes and
stats, and the loop taking over where a start raises or an end moves the views."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from onnx import TensorProto, helper

import graphexec as gx
from graphexec.engine import replay_code
from graphexec.engine.steps import _copy_each
from graphexec.errors import KernelError
from tests.unit.engine.test_decode_steps import _check_plain
from tests.unit.engine.test_replay_steps import FEEDS, _chain, _model, _relu_fn, _vi

ROOT = Path(__file__).resolve().parents[3]
NEVER = object()


def _record(log, name, value=None):
    def call(*args):
        log.append((name, *args))
        return value
    return call


@pytest.mark.parametrize("chunk", [1, 3, 400])
def test_a_program_makes_the_loops_calls_in_its_order(chunk, monkeypatch):
    """Two streams' starts and ends interleaved (results pending across other steps), a result
    that is its output already (no end call), cut into functions of ``chunk`` steps."""
    monkeypatch.setattr(replay_code, "CHUNK", chunk)
    log: list[tuple] = []
    out = np.zeros(2)
    starts = [_record(log, "s0", "a"), _record(log, "s1", out), _record(log, "s2", "c")]
    ends = [_record(log, "e0"), _record(log, "e1"), _record(log, "e2")]
    tape = [0, 1, ~0, 2, ~2, ~1]
    ctx = SimpleNamespace(views={})
    results = [None] * 3
    for fn in replay_code.generate(tape, starts, ends, [NEVER, out, "c"], NEVER):
        assert fn(ctx, ctx.views, results) == (-1, None)
    assert log == [("s0",), ("s1",), ("e0", "a"), ("s2",)] and results == [None] * 3


def test_a_program_hands_back_where_a_start_raises_or_the_views_move():
    boom = ValueError("boom")
    ctx = SimpleNamespace(views={})

    def raises():
        raise boom

    def moves(res):
        ctx.views = {}

    tape = [0, ~0, 1, ~1, 2, ~2]
    starts, never = [lambda: 1, raises, lambda: 3], NEVER
    (fn,) = replay_code.generate(tape, starts, [moves, moves, moves], [never] * 3, never)
    views = ctx.views
    assert fn(ctx, views, [None] * 3) == (1, None)   # the first end moved the views
    (fn,) = replay_code.generate(tape, starts, [lambda r: None] * 3, [never] * 3, never)
    assert fn(ctx, ctx.views, [None] * 3) == (2, boom)


def _steps(session, feeds):
    return session.compile(feeds)._steps


def test_the_decoder_replays_through_its_program_as_the_plain_path():
    graph = gx.load(ROOT / "models" / "gpt2_decoder.onnx")
    rng = np.random.default_rng(4)
    feeds = {"input_ids": np.array([[5]], np.int64), "position_ids": np.array([[6]], np.int64)}
    for i in range(2):
        for w in ("key", "value"):
            feeds[f"past_key_values.{i}.{w}"] = rng.standard_normal((1, 2, 6, 8)).astype(np.float32)
    session = gx.Session(graph)
    results = [session.run(feeds) for _ in range(replay_code.AFTER_REPLAYS + 3)]
    steps = _steps(session, feeds)
    assert steps._program is not None
    assert any(getattr(e, "func", None) is _copy_each for e in steps.ends)   # the Splits' views, copied as checked
    _check_plain(graph, feeds, results)
    other = dict(feeds, input_ids=np.array([[9]], np.int64))
    _check_plain(graph, other, [session.run(other)])   # new values through the same program


def test_bad_values_under_a_program_are_the_kernel_error_and_the_step_stays_direct():
    def picky(ctx, x, out=None):
        if x[0] < 0:
            raise ValueError("negative first")
        return np.maximum(x, 0, out=out)

    good = {"x": np.abs(FEEDS["x"])}
    with _relu_fn(picky):
        session = gx.Session(_chain(), fusion=False)
        for _ in range(replay_code.AFTER_REPLAYS + 2):
            session.run(good)
        steps = _steps(session, good)
        assert steps._program is not None
        with pytest.raises(KernelError, match="negative first"):
            session.run(FEEDS)
        np.testing.assert_array_equal(session.run(good).outputs["v3"], good["x"])
        assert all(r is not None for r in steps.runners)


def test_a_run_time_allocation_under_a_program_sends_later_steps_down_the_plain_path():
    def wide(ctx, x, out=None):   # float64 for a large first value: the store allocates at run time
        y = np.maximum(x, 0, out=out)
        return y.astype(np.float64) + 1 if x[0] > 100 else y

    nodes = [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Neg", ["a"], ["z"]),
             helper.make_node("Abs", ["z"], ["w"])]
    graph = _model(nodes, [_vi("x", TensorProto.FLOAT, [4])], [_vi(n, TensorProto.FLOAT, [4]) for n in "azw"])
    big = {"x": FEEDS["x"] + np.float32(200)}
    with _relu_fn(wide):
        session = gx.Session(graph, fusion=False)
        for _ in range(replay_code.AFTER_REPLAYS + 2):
            np.testing.assert_array_equal(session.run(FEEDS).outputs["w"], np.maximum(FEEDS["x"], 0))
        steps = _steps(session, FEEDS)
        assert steps._program is not None
        result = session.run(big)
        assert steps.runners[0] is not None and steps.runners[1:] == [None, None]
    assert result.outputs["w"].dtype == np.float64
    np.testing.assert_array_equal(result.outputs["w"], big["x"] + 1)


def test_a_context_made_from_its_fixed_fields_is_the_dataclass_one():
    """``executor.made``: the fields given, every other one its default, each mutable one new."""
    from graphexec.engine.executor import ExecContext, made

    fixed = {"device": object(), "stream_of": [0], "graph": object(), "tasks": object(), "views": {"v": 1}}
    a, b, ref = made(fixed), made(fixed), ExecContext(**fixed)
    assert vars(a) == vars(ref) and a.views is fixed["views"]
    assert a.host is not b.host and a.dynamic is not b.dynamic and a.tape is not b.tape and a.streams is not b.streams
