"""Multi-card runs compute their kernels through the single-card engine's replay steps
(``Steps.inline``, ``cluster/cards.py``): outputs by bytes, stats and traces are those of
the plain path (every step a KernelCall: the switch ``test_replay_steps`` turns off)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
import pytest

import graphexec as gx
from graphexec.cluster import tape
from graphexec.cluster.tape import CardsTape
from graphexec.engine.steps import Steps

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"


def _runs(graph, feeds_list, parallel):
    session = gx.Session(graph, devices=2, parallel=parallel, microbatches=1 if parallel == "tensor" else 2)
    return [session.run(f) for f in feeds_list], session


def _same(a, b):
    assert {k: (v.dtype, v.shape, v.tobytes()) for k, v in a.outputs.items()} == \
        {k: (v.dtype, v.shape, v.tobytes()) for k, v in b.outputs.items()}
    assert repr(replace(a.stats, compile_s=0.0, host_time_us=0.0)) == repr(replace(b.stats, compile_s=0.0,
                                                                                    host_time_us=0.0))
    assert a.trace == b.trace


@pytest.mark.parametrize("parallel", ["data", "pipeline", "tensor"])
def test_cards_compute_through_the_steps_as_the_plain_path(parallel, monkeypatch):
    graph = gx.load(LIGHT / "light_squeezenet.onnx")
    x = graph.inputs[0]
    rng = np.random.default_rng(3)
    feeds = [{x: rng.standard_normal((4, *graph.values[x].type.shape[1:])).astype(np.float32)} for _ in range(2)]
    fast, session = _runs(graph, feeds + feeds[:1], parallel)
    with monkeypatch.context() as m:   # every step the plain KernelCall's
        m.setattr(Steps, "_direct", lambda self, i, task, ctx: False)
        m.setattr(Steps, "_hold", lambda self, i, ctx: False)
        plain, _ = _runs(graph, feeds + feeds[:1], parallel)
    for a, b in zip(fast, plain):
        _same(a, b)
    steps = session.compiled._steps
    assert steps is not None and any(r is not None for r in steps.runners)


def _no_tapes(m):
    """Every multi-card run simulates (the switch ``cluster/tape.py`` keeps)."""
    m.setattr(tape, "REPLAY", False)


@pytest.mark.parametrize("name", ["resnet50", "squeezenet"])
def test_data_parallel_replays_its_simulated_timeline(name, monkeypatch):
    """A data-parallel signature is simulated once (``cluster/tape.py``); later runs call
    the tasks' starts and ends in the tape's order, launching nothing: outputs by bytes,
    stats and traces are those of runs that simulate. Squeezenet's run allocates at run
    time: its replays make the same mallocs and frees."""
    graph = gx.load(LIGHT / f"light_{name}.onnx")
    x = graph.inputs[0]
    rng = np.random.default_rng(5)
    shape = (4, *graph.values[x].type.shape[1:])
    feeds = [{x: rng.standard_normal(shape).astype(np.float32)} for _ in range(3)]
    double = {x: np.concatenate([feeds[0][x], feeds[1][x]])}   # another signature
    replays = []
    replay = CardsTape.replay
    monkeypatch.setattr(CardsTape, "replay", lambda self, fns: (replays.append(len(fns)), replay(self, fns))[1])
    taped, session = _runs(graph, feeds + [double, feeds[0]], "data")
    assert len(session.multi._tapes) == 2 and len(replays) == 3   # runs 2, 3 and 5
    with monkeypatch.context() as m:
        _no_tapes(m)
        simulated, other = _runs(graph, feeds + [double, feeds[0]], "data")
    for a, b in zip(taped, simulated):
        _same(a, b)
    devices = [s.multi.cluster.server.devices for s in (session, other)]
    assert [repr(d.allocator.stats()) for d in devices[0].values()] == \
        [repr(d.allocator.stats()) for d in devices[1].values()]   # the same mallocs and frees


def test_no_tape_under_the_hazard_checker():
    graph = gx.load(LIGHT / "light_resnet50.onnx")
    x = graph.inputs[0]
    feeds = {x: np.random.default_rng(0).standard_normal((2, *graph.values[x].type.shape[1:])).astype(np.float32)}
    session = gx.Session(graph, devices=2, parallel="data", check_hazards=True)
    session.run(feeds)
    assert not session.multi._tapes and session.run(feeds).stats.extra["hazards"] == []

