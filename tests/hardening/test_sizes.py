"""Hostile sizes: dims the device cannot hold fail at compile time, naming the number, before
anything is allocated; 100,000-node chains load, compile and run without recursion; subgraphs
nest at most MAX_SUBGRAPH_DEPTH levels."""

from __future__ import annotations

import sys
import tracemalloc

import numpy as np
import pytest
from onnx import helper, numpy_helper

import graphexec as gx
import graphexec.engine.compiled as compiled
from graphexec.frontend.onnx_checks import MAX_SUBGRAPH_DEPTH
from hardening import bad_inputs as B
from hardening.guard import deadline
from hardening.test_corpus import run_cli

X = {"x": np.ones((2, 3), np.float32)}
mk = helper.make_node


@pytest.fixture
def no_device(monkeypatch):
    """Fail the test if compilation gets as far as making a device (allocating anything)."""
    def refuse(*args, **kwargs):
        raise AssertionError("a device was made: the size check came too late")
    monkeypatch.setattr(compiled, "Device", refuse)


@pytest.mark.parametrize("dims,needs", [([2**17, 2**17], "68719476736 bytes;"),
                                        ([2**40, 2**40], "4835703278458516698824704 bytes, its element count "
                                                         "overflows int64;"),
                                        ([2**62, 2**62, 4], "")])
def test_hostile_constant_fails_before_allocating(dims, needs, no_device):
    graph = gx.load(B.hostile_constant(dims))
    tracemalloc.start()
    try:
        with deadline(30, "compiling a hostile constant"), pytest.raises(gx.OutOfMemoryError) as e:
            gx.Session(graph).compile({"x": np.ones(1, np.float32)})
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert e.value.code == 207001 and "tensor 'c' (output of node fill (ConstantOfShape))" in str(e.value)
    assert needs in str(e.value) and "device ascend910 has 34359738368 bytes" in str(e.value)
    assert peak < 64 << 20  # nothing near the tensor's size was ever allocated on the host


@pytest.mark.parametrize("op", ["Expand", "Tile"])
def test_hostile_broadcast_fails_at_compile_time(op, no_device):
    shape = numpy_helper.from_array(np.array([2**20, 2**20], np.int64), "s")
    g = helper.make_graph([mk(op, ["x", "s"], ["y"], name="grow")], "g",
                          [helper.make_tensor_value_info("x", 1, [1, 1])],
                          [helper.make_tensor_value_info("y", 1, None)], [shape])
    with pytest.raises(gx.OutOfMemoryError, match=r"tensor 'y' \(output of node grow \(" + op + r"\)\) "
                                                  r"float32\[1048576x1048576\] needs 4398046511104 bytes"):
        gx.Session(gx.load(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))).compile(
            {"x": np.ones((1, 1), np.float32)})


def test_declared_input_too_big_for_a_small_device(tmp_path, capsys):
    profile = B.device_profile(tmp_path, hbm_capacity_bytes=1 << 20)
    model = B.write(tmp_path, "m.onnx", B.model([mk("Relu", ["x"], ["y"])], shape=[512, 1024]))
    rc, _, err = run_cli(["run", model, "--device", profile], capsys)
    assert (rc, err) == (2, "graphexec: error: ACL_ERROR_RT_MEMORY_ALLOCATION (207001): input 'x' float32[512x1024] "
                            "needs 2097152 bytes; device ascend910 has 1048576 bytes\n")


def test_default_feeds_refuse_sizes_int64_cannot_count():
    graph = gx.load(B.model([mk("Relu", ["x"], ["y"])], shape=[2**40, 2**40]))
    with pytest.raises(gx.FeedError, match=r"^input 'x' float32\[1099511627776x1099511627776\] needs "
                                           r"4835703278458516698824704 bytes, more than int64 can count$"):
        gx.default_feeds(graph)


@pytest.mark.parametrize("op", ["Relu", "Identity", "Add"])
def test_chain_of_100000_nodes(op, request):
    """About 15 s for Relu on a laptop core (load ~3 s, compile ~6 s, run ~3 s); the guard is generous.
    The Add chain is as fast; CI runs it at 20,000 nodes to save the time, --long at 100,000."""
    n = 20_000 if op == "Add" and not request.config.getoption("--long") else 100_000
    if op == "Add":
        names = ["x"] + [f"t{i}" for i in range(1, n)] + ["y"]
        model = B.model([mk("Add", [names[i], "x"], [names[i + 1]], name=f"n{i}") for i in range(n)])
    else:
        model = B.chain(n, op)
    limit = sys.getrecursionlimit()
    with deadline(240, f"a {n}-node {op} chain"):
        graph = gx.load(model)
        result = gx.Session(graph).run(X)
    assert sys.getrecursionlimit() == limit  # nobody raised it to get through
    want = {"Relu": np.ones((2, 3)), "Identity": np.ones((2, 3)), "Add": np.full((2, 3), n + 1.0)}[op]
    np.testing.assert_array_equal(result.outputs["y"], want)


def test_nested_subgraphs_up_to_the_limit_run():
    result = gx.Session(gx.load(B.nested_ifs(MAX_SUBGRAPH_DEPTH))).run(X)
    np.testing.assert_array_equal(result.outputs["y"], np.ones((2, 3)))


@pytest.mark.parametrize("depth", [MAX_SUBGRAPH_DEPTH + 1, 100, 5000])
def test_nested_subgraphs_past_the_limit_are_refused(depth):
    with deadline(30, f"{depth} nested Ifs"), pytest.raises(gx.ModelLoadError) as e:
        gx.load(B.nested_ifs(depth))
    assert str(e.value) == (f"g: node if0 (If) nests subgraphs more than {MAX_SUBGRAPH_DEPTH} levels deep; "
                            f"graphexec supports at most {MAX_SUBGRAPH_DEPTH}")


def test_empty_tensor_numpy_cannot_hold_fails_at_compile_time(no_device):
    """Found by the --long fuzz run: numpy counts the bytes of the non-zero dims of [2**62, 0]."""
    graph = gx.load(B.model([mk("Relu", ["x"], ["y"])], shape=[2**62, 0]))
    with pytest.raises(gx.GraphError, match=r"^g: tensor 'x' float32\[4611686018427387904x0\] is empty, but its "
                                            r"other dims are too big for numpy to hold$"):
        gx.Session(graph).compile(None)
