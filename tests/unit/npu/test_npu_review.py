"""Review findings on eager mode, each with the behaviour torch has: a captured wait between
streams is kept (it was dropped, so a replay raced), a tensor's truth is its one value,
and a card reset forgets the old card's kernel faults."""

from __future__ import annotations

import numpy as np
import pytest

import graphexec.npu as npu
from graphexec.errors import GraphExecError


def test_a_captured_wait_between_streams_is_kept():
    x = npu.randn(64, 64)
    s1 = npu.Stream()
    g = npu.NPUGraph()
    with npu.graph(g):
        with npu.stream(s1):
            y = x * 2
        npu.current_stream().wait_stream(s1)
        z = y + 1
    g.replay()
    npu.synchronize()
    np.testing.assert_array_equal(z.cpu().numpy(), x.cpu().numpy() * 2 + 1)
    assert len(g._launches) == 4   # two ops, the record on s1 and the wait for it (the wait was lost)


def test_truth_of_a_tensor():
    assert bool(npu.tensor([0.0]) > 1) is False and bool(npu.tensor([2.0]) > 1) is True
    assert bool(npu.tensor(3.0) > 1) is True
    with pytest.raises(GraphExecError, match="the truth value of a tensor of 2 values is ambiguous"):
        bool(npu.tensor([1.0, 2.0]))


def test_a_reset_card_forgets_the_old_cards_faults():
    x = npu.tensor([1.0, 2.0]).npu()
    npu.ops.run("Gather", x, npu.tensor(np.array([5], np.int64)).npu())   # index 5 of 2: fails on the device
    npu.reset_device()   # waits for the card (the fault happens) and releases it
    npu.set_device(0)
    y = npu.tensor([3.0]).npu() + 1
    npu.synchronize()   # the fresh card has no fault of the old one to raise
    assert y.cpu().tolist() == [4.0]


def test_list_and_array_arguments_make_a_plan_key():
    x = npu.randn(4, 6)
    assert npu.ops.run("Reshape", x, [2, -1]).shape == (2, 12)   # a list constant was a bare TypeError
    c = npu.ops.run("Constant", value=np.array([1.0, 2.0], np.float32))   # an array attribute, too
    np.testing.assert_array_equal(c.cpu().numpy(), [1.0, 2.0])


def test_an_op_whose_values_decide_its_shape_runs_on_a_host_tensor():
    x = npu.tensor(np.array([0.0, 3.0, 0.0, 4.0], np.float32))   # on the host: it used to fail reshaping
    np.testing.assert_array_equal(npu.ops.run("NonZero", x).numpy(), [[1, 3]])
    np.testing.assert_array_equal(npu.ops.run("NonZero", x.npu()).cpu().numpy(), [[1, 3]])


def test_a_module_plans_again_on_a_card_made_anew():
    import graphexec as gx

    b = gx.GraphBuilder("m", opset=17)
    x = b.input("x", "float32", [4])
    b.output(b.Relu(x))
    module = npu.Module(b.build())
    a = npu.tensor(np.array([-1.0, 2.0, -3.0, 4.0], np.float32)).npu()
    np.testing.assert_array_equal(module(a).cpu().numpy(), [0, 2, 0, 4])
    npu.init()   # a fresh card 0: the old plan's device and streams are gone
    a = npu.tensor(np.array([-1.0, 5.0, -3.0, 6.0], np.float32)).npu()
    np.testing.assert_array_equal(module(a).cpu().numpy(), [0, 5, 0, 6])   # it used to say "stream 0 was destroyed"
