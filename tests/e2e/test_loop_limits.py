"""Loops cannot run away (issue 21): a trip count of 10**12 that only the trip count can end is
refused before it runs (issue 39), a condition that never turns false stops at the documented
iteration limit, and a carried value that doubles each
iteration stops at the device's memory, each with one line (CLI exit 2)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from loop_models import runaway_loop

import cli
import graphexec as gx
from graphexec.engine.control_runs import DEFAULT_MAX_ITERATIONS, MAX_ITERATIONS_VAR
from graphexec.errors import KernelError, OutOfMemoryError
from graphexec.runtime.profiles import load_profile

FEEDS = {"v0": np.zeros(1, np.float32)}


def test_a_huge_trip_count_is_refused_before_it_runs(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv(MAX_ITERATIONS_VAR, "200")
    with pytest.raises(KernelError) as err:
        gx.Session(gx.load(runaway_loop(10**12))).run(FEEDS)
    assert str(err.value) == (f"node loop (Loop): its trip count {10**12} is past the limit of 200 iterations, "
                              f"and only the trip count can end it (set {MAX_ITERATIONS_VAR} to allow more)")
    path = tmp_path / "runaway.onnx"
    onnx.save(runaway_loop(10**12), str(path))
    assert cli.main(["run", str(path)]) == 2
    assert f"its trip count {10**12} is past the limit of 200 iterations" in capsys.readouterr().err


def test_the_default_limit_is_documented():
    assert DEFAULT_MAX_ITERATIONS == 1_000_000


def test_a_loop_that_never_stops_stops_at_the_limit(monkeypatch):
    monkeypatch.setenv(MAX_ITERATIONS_VAR, "50")
    forever = gx.load(runaway_loop(np.iinfo(np.int64).max))   # as exporters write a while loop, the cond never false
    with pytest.raises(KernelError, match=r"still running after 50 iterations, the limit"):
        gx.Session(forever).run(FEEDS)
    assert gx.Session(gx.load(runaway_loop(50))).run(FEEDS).outputs["v"].tolist() == [50.0]


def test_a_carried_value_that_doubles_stops_at_device_memory():
    small = load_profile("ascend910").model_copy(update={"hbm_capacity_bytes": 1 << 20})
    with pytest.raises(OutOfMemoryError) as err:
        gx.Session(gx.load(runaway_loop(40, grow=True)), device=small).run(FEEDS)
    assert "\n" not in str(err.value) and str(err.value).startswith("ACL_ERROR_RT_MEMORY_ALLOCATION (207001)")
