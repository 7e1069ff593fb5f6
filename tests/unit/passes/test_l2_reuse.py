"""On-chip L2: a tensor written by one kernel and read by the next while it fits is served
at L2 bandwidth (hits); weights, graph inputs and tensors evicted or too big come from HBM."""

from __future__ import annotations

import numpy as np
import pytest

import graphexec as gx
from graphexec.runtime.kernel_time import hbm_equivalent, l2_hits
from graphexec.runtime.profiles import load_profile

MiB = 1 << 20


def test_hits_follow_what_l2_holds_least_recently_used_out_first():
    steps = [([("x", 4 * MiB)], [("a", 4 * MiB, False)]),          # reads an input: miss
             ([("a", 4 * MiB)], [("b", 8 * MiB, False)]),          # a was just written: hit
             ([("b", 8 * MiB)], [("c", 6 * MiB, False)]),          # hit; c evicts a (4) and b (8)? 4+8+6 > 16
             ([("a", 4 * MiB), ("c", 6 * MiB)], []),               # a evicted (oldest), c there
             ([("big", 1)], [("big", 32 * MiB, False)]),           # bigger than L2: never stays
             ([("big", 32 * MiB)], [])]
    assert l2_hits(steps, 16 * MiB) == [0, 4 * MiB, 8 * MiB, 6 * MiB, 0, 0]


def test_slices_of_one_tensor_add_up():
    steps = [([], [("cat", 2 * MiB, True)]), ([], [("cat", 3 * MiB, True)]), ([("cat", 5 * MiB)], [])]
    assert l2_hits(steps, 16 * MiB)[-1] == 5 * MiB


def test_hit_bytes_count_at_the_hbm_to_l2_bandwidth_ratio():
    p = load_profile("ascend310p")   # 204.8 GB/s LPDDR4X, 819.2 GB/s L2: a hit costs a quarter
    assert p.kernels is not None and p.kernels.l2_bandwidth_gbps == 4 * p.hbm_bandwidth_gbps
    assert hbm_equivalent(1000.0, 400.0, p) == pytest.approx(600.0 + 100.0)
    assert hbm_equivalent(1000.0, 400.0, p.model_copy(update={"kernels": None})) == 1000.0


def _chain(channels: int, hw: int):
    b = gx.GraphBuilder("chain")
    x = b.input("x", "float32", [1, channels, hw, hw])
    b.output(b.Abs(b.Neg(b.Relu(x))))
    return b.build()


def test_a_chain_that_fits_reads_its_intermediates_from_l2():
    s = gx.Session(_chain(64, 56), device="ascend310p")   # 784 KiB tensors, 16 MiB L2
    nbytes = 64 * 56 * 56 * 4
    relu, neg, absolute = s.compile().tasks.tasks
    assert relu.bytes == 2 * nbytes                         # its input comes from HBM
    assert neg.bytes == absolute.bytes == nbytes + nbytes / 4   # read from L2, written to HBM


def test_a_chain_too_big_for_l2_gets_no_hits():
    s = gx.Session(_chain(64, 400), device="ascend310p")   # 39 MiB tensors
    assert all(t.bytes == 2 * 64 * 400 * 400 * 4 for t in s.compile().tasks.tasks)


def test_weights_never_hit():
    b = gx.GraphBuilder("mm")
    w = b.constant(np.ones((256, 256), np.float32), "w")
    b.output(b.MatMul(b.Relu(b.input("x", "float32", [256, 256])), w))
    relu, mm = gx.Session(b.build(), device="ascend310p").compile().tasks.tasks
    act = 256 * 256 * 4
    assert mm.bytes == pytest.approx(3 * act - act + act / 4)   # x from L2; w and the output at HBM cost
