"""Loops cannot run away (issue 21): a trip count of 10**12, or a condition that never turns
false, stops at the documented iteration limit, and a carried value that doubles each
iteration stops at the device's memory, each with one line (CLI exit 2)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import cli
import graphexec as gx
from graphexec.engine.control_runs import DEFAULT_MAX_ITERATIONS, MAX_ITERATIONS_VAR
from graphexec.errors import KernelError, OutOfMemoryError
from graphexec.runtime.profiles import load_profile


def _loop(trips: int, grow: bool = False) -> onnx.ModelProto:
    """v <- v + 1 (or v <- concat(v, v)) for ``trips`` iterations while the condition holds."""
    mk = helper.make_node
    step = (mk("Concat", ["v_in", "v_in"], ["v_out"], axis=0) if grow else mk("Add", ["v_in", "one"], ["v_out"]))
    body = helper.make_graph(
        [mk("Identity", ["c_in"], ["c_out"]), step], "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("c_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_in", TensorProto.FLOAT, None)],
        [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_out", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.array([1.0], np.float32), "one")])
    g = helper.make_graph(
        [mk("Loop", ["M", "cond", "v0"], ["v"], body=body, name="loop")], "runaway",
        [helper.make_tensor_value_info("v0", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("v", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.array(trips, np.int64), "M"), numpy_helper.from_array(np.array(True), "cond")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


FEEDS = {"v0": np.zeros(1, np.float32)}


def test_a_huge_trip_count_stops_at_the_limit(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv(MAX_ITERATIONS_VAR, "200")
    with pytest.raises(KernelError) as err:
        gx.Session(gx.load(_loop(10**12))).run(FEEDS)
    assert str(err.value) == (f"node loop (Loop): still running after 200 iterations of its trip count {10**12}, "
                              f"the limit (set {MAX_ITERATIONS_VAR} to allow more)")
    path = tmp_path / "runaway.onnx"
    onnx.save(_loop(10**12), str(path))
    assert cli.main(["run", str(path)]) == 2
    assert "still running after 200 iterations" in capsys.readouterr().err


def test_the_default_limit_is_documented():
    assert DEFAULT_MAX_ITERATIONS == 1_000_000


def test_a_loop_that_never_stops_stops_at_the_limit(monkeypatch):
    monkeypatch.setenv(MAX_ITERATIONS_VAR, "50")
    forever = gx.load(_loop(np.iinfo(np.int64).max))   # as exporters write a while loop, the cond never false
    with pytest.raises(KernelError, match=r"still running after 50 iterations, the limit"):
        gx.Session(forever).run(FEEDS)
    assert gx.Session(gx.load(_loop(50))).run(FEEDS).outputs["v"].tolist() == [50.0]


def test_a_carried_value_that_doubles_stops_at_device_memory():
    small = load_profile("ascend910").model_copy(update={"hbm_capacity_bytes": 1 << 20})
    with pytest.raises(OutOfMemoryError) as err:
        gx.Session(gx.load(_loop(40, grow=True)), device=small).run(FEEDS)
    assert "\n" not in str(err.value) and str(err.value).startswith("ACL_ERROR_RT_MEMORY_ALLOCATION (207001)")
