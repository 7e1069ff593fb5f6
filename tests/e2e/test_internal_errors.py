"""A bug inside a pass is an internal error (exit 1, traceback under GRAPHEXEC_DEBUG=1),
never reported as bad input (exit 2)."""

from __future__ import annotations

from pathlib import Path

import pytest

import cli
import graphexec as gx
from graphexec.errors import GraphExecError, InvariantError
from graphexec.passes.stream_assignment import StreamAssignment

MODEL = str(Path(__file__).resolve().parents[2] / "models" / "inception_block.onnx")


def _broken(error: Exception):
    def call(self, state):
        raise error
    return call


@pytest.fixture
def broken_pass(monkeypatch):
    monkeypatch.delenv("GRAPHEXEC_DEBUG", raising=False)
    monkeypatch.setattr(StreamAssignment, "call", _broken(KeyError("stream 7")))


def test_a_key_error_in_a_pass_exits_1_and_names_the_pass(broken_pass, capsys):
    assert cli.main(["run", MODEL]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("graphexec: internal error: KeyError: 'stream 7'") and "\n" not in err
    assert "in pass 'streams' after ['shapes', 'sizes', 'graph_fusion', 'layout', 'lowering', 'precision', 'l2_reuse']" in err


def test_the_api_raises_the_bug_as_it_is(broken_pass):
    with pytest.raises(KeyError) as info:
        gx.Session(MODEL).compile(None)
    assert not isinstance(info.value, GraphExecError)
    assert info.value.__notes__ == ["in pass 'streams' after ['shapes', 'sizes', 'graph_fusion', 'layout', 'lowering', 'precision', 'l2_reuse']"]


def test_debug_shows_the_traceback(broken_pass, monkeypatch):
    monkeypatch.setenv("GRAPHEXEC_DEBUG", "1")
    with pytest.raises(KeyError):
        cli.main(["run", MODEL])


def test_a_broken_contract_is_internal_too(monkeypatch, capsys):
    monkeypatch.delenv("GRAPHEXEC_DEBUG", raising=False)
    monkeypatch.setattr(StreamAssignment, "call", _broken(InvariantError("wait 12 is implied")))
    assert cli.main(["run", MODEL]) == 1
    assert "internal error: InvariantError: wait 12 is implied" in capsys.readouterr().err


def test_bad_input_inside_a_pass_is_still_exit_2(monkeypatch, capsys):
    monkeypatch.setattr(StreamAssignment, "call", _broken(GraphExecError("node 'x': too many streams")))
    # its dims set: a run on made inputs adds which dims to set to any bad-input line (cli/made.py)
    assert cli.main(["run", MODEL, "--shape", "data=1,192,28,28"]) == 2
    assert capsys.readouterr().err.strip() == "graphexec: error: node 'x': too many streams"


def test_a_schedule_past_the_device_limits_is_a_pass_error():
    import numpy as np

    from dags import random_dag
    from graphexec.errors import PassError
    from graphexec.runtime.profiles import load_profile

    tiny = load_profile("ascend910").model_copy(update={"max_events": 1})
    with pytest.raises(PassError, match="events at once; device ascend910 allows 1"):
        gx.Session(random_dag(np.random.default_rng(3), 16), streams=4, device=tiny).compile(None)
