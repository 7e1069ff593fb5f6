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
    p = load_profile("ascend310p").model_copy(update={"hbm_bandwidth_gbps": 200.0})
    assert p.kernels is not None
    p = p.model_copy(update={"kernels": p.kernels.model_copy(update={"l2_bandwidth_gbps": 800.0})})
    assert hbm_equivalent(1000.0, 400.0, p) == pytest.approx(600.0 + 100.0)   # a hit costs a quarter
    assert hbm_equivalent(1000.0, 400.0, p.model_copy(update={"kernels": None})) == 1000.0


def _chain(channels: int, hw: int):
    b = gx.GraphBuilder("chain")
    x = b.input("x", "float32", [1, channels, hw, hw])
    perm = [0, 1, 3, 2]   # data movers: no fusion pass merges them
    b.output(b.Transpose(b.Transpose(b.Transpose(x, perm=perm), perm=perm), perm=perm))
    return b.build()


def _bytes(graph, device: str, l2: bool = True) -> list[float]:
    p = load_profile(device)
    p = p if l2 else p.model_copy(update={"kernels": None})
    return [t.bytes for t in gx.Session(graph, device=p).compile().tasks.tasks]


def _ratio(device: str) -> float:
    p = load_profile(device)
    assert p.kernels is not None
    return p.hbm_bandwidth_gbps / p.kernels.l2_bandwidth_gbps


def test_a_chain_that_fits_reads_its_intermediates_from_l2():
    graph = _chain(64, 56)   # 784 KiB tensors (392 KiB in float16), 192 MiB of L2
    plain, cut = _bytes(graph, "ascend910b", False), _bytes(graph, "ascend910b")
    n = plain[0] / 2   # one tensor at the tasks' width
    assert cut[0] == plain[0]                                # its input comes from HBM
    assert cut[1] == cut[2] == pytest.approx(n + n * _ratio("ascend910b"))   # read from L2, written to HBM


def test_a_chain_too_big_for_l2_gets_no_hits():
    graph = _chain(64, 400)   # 39 MiB tensors (20 MiB in float16), 16 MiB of L2
    assert _bytes(graph, "ascend310p") == _bytes(graph, "ascend310p", False)


def test_weights_never_hit():
    b = gx.GraphBuilder("mm")
    w = b.constant(np.ones((256, 256), np.float32), "w")
    b.output(b.MatMul(b.Relu(b.input("x", "float32", [256, 256])), w))
    graph = b.build()
    (_, mm_plain), (_, mm) = _bytes(graph, "ascend310p", False), _bytes(graph, "ascend310p")
    act = mm_plain / 3   # x, w and the output, each 256 x 256
    assert mm == pytest.approx(mm_plain - act + act * _ratio("ascend310p"))   # x from L2; w and the output from HBM


def test_a_dead_tensor_stops_taking_l2_capacity():
    from graphexec.runtime.kernel_time import l2_hits_by_name

    # p lives until the last kernel; t dies after kernel 2, before u is written
    steps = [([], [("p", 8 * MiB, False)]),
             ([], [("t", 8 * MiB, False)]),
             ([("t", 8 * MiB)], []),
             ([], [("u", 8 * MiB, False)]),
             ([("p", 8 * MiB), ("u", 8 * MiB)], [])]
    # kept by name, t's dead lines push p out when u arrives (8 + 8 + 8 > 16)
    assert l2_hits_by_name(steps, 16 * MiB) == [0, 0, 8 * MiB, 0, 8 * MiB]
    # by address, u lands where t was (the allocator reuses its memory): p stays
    assert l2_hits(steps, 16 * MiB) == [0, 0, 8 * MiB, 0, 16 * MiB]


def test_a_tensor_read_and_written_by_one_kernel_are_both_live_in_it():
    steps = [([], [("p", 8 * MiB, False)]),
             ([], [("t", 8 * MiB, False)]),
             ([("t", 8 * MiB)], [("u", 8 * MiB, False)]),   # t dies here, but only after u is written
             ([("p", 8 * MiB), ("u", 8 * MiB)], [])]
    assert l2_hits(steps, 16 * MiB) == [0, 0, 8 * MiB, 8 * MiB]   # p was evicted for u
