"""onnx's shape inference and version converter hold the GIL for the whole C call, so no
Python signal handler ran until they returned (seconds, on a large model). A big call now
runs in a forked child (``_files.interruptible``): SIGINT and SIGTERM stop it at once with
130/143 and one line, and nothing is written (issue 39, classes 4 and 6)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from graphexec._files import interruptible

ROOT = Path(__file__).resolve().parents[2]


def test_a_big_call_runs_in_a_child_and_gives_its_result_or_its_error():
    me = os.getpid()
    assert interruptible(os.getpid, big=False) == me
    assert interruptible(os.getpid, big=True) != me
    assert interruptible(lambda: np.arange(3), big=True).tolist() == [0, 1, 2]
    bad = h.make_model(h.make_graph([h.make_node("Add", ["a"], ["b"])], "g", [], []))
    with pytest.raises(onnx.shape_inference.InferenceError):
        interruptible(lambda: onnx.shape_inference.infer_shapes(bad, strict_mode=True), big=True)


def _converting(path: Path, n: int) -> None:
    """A model-local function of ``n`` Relu nodes written for opset 12, in an opset-18 model:
    the version converter takes seconds on it (it grows faster than the node count)."""
    body = [h.make_node("Relu", [f"t{i}" if i else "x"], [f"t{i + 1}" if i < n - 1 else "y"]) for i in range(n)]
    f = h.make_function("d", "F", ["x"], ["y"], body, [h.make_opsetid("", 12)])
    g = h.make_graph([h.make_node("F", ["x"], ["y"], domain="d")], "g", [h.make_tensor_value_info("x", T.FLOAT, [2])],
                     [h.make_tensor_value_info("y", T.FLOAT, [2])])
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 18), h.make_opsetid("d", 1)], functions=[f]), path)


def _looping(path: Path, n: int) -> None:
    """A Loop whose body is a chain of ``n`` Relu nodes: one node in the main graph, and onnx's
    shape inference of the whole model takes seconds in C."""
    chain = [h.make_node("Relu", [f"t{i}" if i else "v"], [f"t{i + 1}" if i < n - 1 else "v_out"]) for i in range(n)]
    vi = h.make_tensor_value_info
    body = h.make_graph([h.make_node("Identity", ["c"], ["c_out"]), *chain], "body",
                        [vi("i", T.INT64, []), vi("c", T.BOOL, []), vi("v", T.FLOAT, [2])],
                        [vi("c_out", T.BOOL, []), vi("v_out", T.FLOAT, [2])])
    consts = [onnx.numpy_helper.from_array(np.array(2, np.int64), "trips"),
              onnx.numpy_helper.from_array(np.array(True), "cond")]
    g = h.make_graph([h.make_node("Loop", ["trips", "cond", "x"], ["y"], body=body, name="loop")], "g",
                     [vi("x", T.FLOAT, [2])], [vi("y", T.FLOAT, [2])], consts)
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 18)]), path)


CHILD = """
import sys, time
from graphexec import cli, _files
import graphexec.frontend.onnx_functions as F
import graphexec.passes.shape_inference as S
original = _files.interruptible
def announced(call, big):
    if big:
        print("long call", flush=True)
    try:
        return original(call, big)
    except BaseException:
        open(sys.argv[2], "w").write(repr(time.time()))
        raise
F.interruptible = S.interruptible = announced
sys.exit(cli.main(["run", sys.argv[1], "--trace", sys.argv[3]]))
"""


@pytest.mark.slow
@pytest.mark.parametrize("make,n,sig,rc,line", [
    (_converting, 60_000, signal.SIGINT, 130, "interrupted"),
    (_converting, 60_000, signal.SIGTERM, 143, "terminated"),
    (_looping, 400_000, signal.SIGTERM, 143, "terminated"),
], ids=["version_converter_sigint", "version_converter_sigterm", "shape_inference_sigterm"])
def test_a_signal_stops_a_long_onnx_call_at_once(make, n, sig, rc, line, tmp_path):
    model, raised, trace = tmp_path / "m.onnx", tmp_path / "raised", tmp_path / "t.json"
    make(model, n)
    p = subprocess.Popen([sys.executable, "-c", CHILD, str(model), str(raised), str(trace)], cwd=ROOT,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert p.stdout is not None and p.stdout.readline().strip() == "long call"
    time.sleep(0.5)
    sent = time.time()
    p.send_signal(sig)
    _, err = p.communicate(timeout=300)
    assert (p.returncode, err.strip()) == (rc, f"graphexec: {line}")
    assert float(raised.read_text()) - sent < 1.5   # the C call alone runs for seconds more
    assert sorted(f.name for f in tmp_path.iterdir()) == ["m.onnx", "raised"]   # no trace, no temporary
