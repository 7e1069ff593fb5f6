"""A Session is safe to share (issue 21, class 5): four threads running one session on
different inputs each get their own correct outputs (they used to get each other's), and
feeds that are not arrays convert to the declared dtype when nothing changes, else one line."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import onnx
import pytest

import graphexec as gx
from graphexec.errors import FeedError

SQUEEZENET = Path(onnx.__file__).parent / "backend/test/data/light/light_squeezenet.onnx"


def test_threads_sharing_a_session_get_their_own_outputs():
    session = gx.Session(gx.load(str(SQUEEZENET)), streams=2)
    name = session.graph.inputs[0]
    inputs = [np.random.default_rng(i).standard_normal((1, 3, 224, 224)).astype(np.float32) for i in range(4)]
    alone = [gx.Session(gx.load(str(SQUEEZENET)), streams=2).run({name: x}).outputs for x in inputs]
    got: dict[int, dict] = {}
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            for _ in range(3):
                got[i] = session.run({name: inputs[i]}).outputs
                assert all(np.array_equal(got[i][k], alone[i][k]) for k in alone[i])
        except BaseException as e:   # noqa: BLE001  (reported below)
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]
    assert all(np.array_equal(got[i][k], alone[i][k]) for i in range(4) for k in alone[i])


def _add(dtype: str) -> gx.Graph:
    b = gx.GraphBuilder("add", opset=17)
    x = b.input("x", dtype, [3])
    b.output(b.Add(x, x))
    return b.build()


@pytest.mark.parametrize("dtype,value,want", [("float32", [1, 2, 3], [2, 4, 6]), ("float32", [0.5, 1.5, 2.5], [1, 3, 5]),
                                              ("int64", [1, 2, 3], [2, 4, 6]), ("uint8", (1, 2, 3), [2, 4, 6]),
                                              ("float32", np.float64(2.0) * np.ones(3), [4, 4, 4])])
def test_values_that_convert_unchanged_are_accepted(dtype, value, want):
    out = gx.Session(_add(dtype)).run({"x": value if not isinstance(value, np.ndarray) else value.tolist()})
    assert out.outputs["y" if "y" in out.outputs else next(iter(out.outputs))].tolist() == want


@pytest.mark.parametrize("dtype,value,message", [
    ("float32", None, "input 'x' is None; it takes a float32[3] tensor"),
    ("int64", [0.5, 1.0, 2.0], "input 'x': the list's float64 values do not convert to int64 unchanged"),
    ("uint8", [1, 2, 300], "input 'x': the list's int64 values do not convert to uint8 unchanged"),
    ("float32", ["a", "b", "c"], "input 'x': a list of <U1 values is not a float32[3] tensor"),
    ("float32", [[1, 2], [3]], "input 'x': this list does not make an array (ragged?)"),
])
def test_values_that_do_not_convert_are_one_line(dtype, value, message):
    with pytest.raises(FeedError) as err:
        gx.Session(_add(dtype)).run({"x": value})
    assert str(err.value) == message


def test_feeds_that_are_not_a_mapping_are_one_line():
    with pytest.raises(FeedError, match="feeds must be a mapping of input name to array, not list"):
        gx.Session(_add("float32")).run([np.ones(3, np.float32)])   # type: ignore[arg-type]


@pytest.mark.parametrize("kw,message", [({"fold": "no"}, "fold: Input should be a valid boolean"),
                                        ({"policy": 5}, "policy: Input should be a valid string"),
                                        ({"check_hazards": 1}, "check_hazards: Input should be a valid boolean"),
                                        ({"memory_reuse": "yes"}, "memory_reuse: Input should be a valid boolean")])
def test_session_options_go_through_the_yaml_rules(kw, message):
    with pytest.raises(gx.GraphExecError) as err:
        gx.Session(_add("float32"), **kw)
    assert str(err.value) == message
