"""The one switch (``GRAPHEXEC_PLAIN=1`` / ``graphexec._switch.plain()``) turns every fast path
off: the compiled event loop, the batched loops, the replayed timelines (one card and
several), the prepared replay steps and the kernels' fast algorithms. What a run computes
agrees within float tolerance and what it simulates (stats, schedule, trace) is identical."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
import pytest

import graphexec as gx
from graphexec import _switch
from graphexec.cluster.tape import CardsTape
from graphexec.engine.replay import Tape
from graphexec.engine.steps import Steps
from graphexec.kernels import conv2d, detection, winograd
from graphexec.runtime import sim_core

# what each fast path calls, and only it: the switch off, none of them may run
FAST_PATHS = [(winograd, "conv"), (Steps, "replay"), (Steps, "inline"), (sim_core, "_run"),
              (Tape, "stats_for"), (CardsTape, "replay")]

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"


def _timing(result):
    return repr(replace(result.stats, compile_s=0.0, host_time_us=0.0)), result.trace


def _runs(graph, feeds, **session):
    s = gx.Session(graph, **session)
    return [s.run(feeds) for _ in range(2)]   # the second replays what the first recorded


def _agree(fast, plain):
    for a, b in zip(fast, plain):
        assert _timing(a) == _timing(b)
        assert a.outputs.keys() == b.outputs.keys()
        for k in a.outputs:
            np.testing.assert_allclose(a.outputs[k], b.outputs[k], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name,session", [("squeezenet", {"streams": 2}),
                                          ("squeezenet", {"devices": 2, "parallel": "data"}),
                                          ("inception_v1", {"streams": 4})])
def test_plain_runs_simulate_the_same_and_compute_within_tolerance(name, session, monkeypatch):
    graph = gx.load(LIGHT / f"light_{name}.onnx")
    x = graph.inputs[0]
    declared = graph.values[x].type.shape
    shape = (4 if "devices" in session else declared[0], *declared[1:])   # cards split a batch
    feeds = {x: np.random.default_rng(0).standard_normal(shape).astype(np.float32)}
    fast = _runs(graph, feeds, **session)
    used: list[str] = []
    for owner, attr in FAST_PATHS:
        real = getattr(owner, attr)
        monkeypatch.setattr(owner, attr, lambda *a, _r=real, _t=attr, **k: (used.append(_t), _r(*a, **k))[1])
    with _switch.plain():
        plain = _runs(graph, feeds, **session)
    assert used == [], f"fast paths taken with the switch off: {sorted(set(used))}"
    assert _switch.FAST
    _agree(fast, plain)


def test_the_switch_is_read_where_each_fast_path_is_chosen():
    assert sim_core.enabled() == sim_core.CORE
    with _switch.plain():
        assert not sim_core.enabled() and not _switch.fast()
    assert _switch.fast()
    assert conv2d._switch is _switch and detection._switch is _switch


def test_environment_turns_it_off_for_a_process():
    code = "from graphexec import _switch; from graphexec.runtime import sim_core; " \
           "print(_switch.fast(), sim_core.enabled())"
    env = {**os.environ, _switch.ENV: "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
