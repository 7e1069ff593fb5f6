"""Ops that move data are priced on the bytes they move, not on their whole inputs: a
one-token embedding lookup costs less than a 128-token one, and slicing one row of a big
tensor less than slicing a thousand."""

from __future__ import annotations

import numpy as np

import graphexec as gx
from graphexec.kernels.cost import node_cost

F32 = 4


def _gather(tokens: int, table=(30522, 384)):
    out = (1, tokens, table[1])
    return node_cost("Gather", [table, (1, tokens)], F32 * table[0] * table[1] + 8 * tokens, [out],
                     F32 * int(np.prod(out)), {}, False)


def test_a_gather_moves_its_rows_and_indices_not_the_table():
    one, many = _gather(1), _gather(128)
    assert one.bytes == 2 * F32 * 384 + 8 and many.bytes == 2 * F32 * 128 * 384 + 8 * 128
    assert one.flops == 384 and many.flops == 128 * 384
    assert one.block_dim == 1 and many.block_dim == 6   # 192 KiB of output in 32 KiB tiles


def test_a_slice_moves_its_output_twice():
    for rows in (1, 1024):
        out = (rows, 4096)
        c = node_cost("Slice", [(4096, 4096), (1,), (1,)], F32 * 4096 * 4096 + 16, [out], F32 * rows * 4096, {}, False)
        assert c.bytes == 2 * F32 * rows * 4096 + 16 and c.flops == rows * 4096


def test_a_scatter_moves_its_updates_and_indices():
    c = node_cost("ScatterND", [(1000, 64), (10, 1), (10, 64)], F32 * 1000 * 64 + 8 * 10 + F32 * 640, [(1000, 64)],
                  F32 * 1000 * 64, {}, False)
    assert c.bytes == 2 * F32 * 640 + 8 * 10


def test_other_vector_ops_keep_inputs_plus_outputs():
    c = node_cost("Transpose", [(64, 128)], F32 * 64 * 128, [(128, 64)], F32 * 64 * 128, {}, False)
    assert c.bytes == 2 * F32 * 64 * 128


def test_a_one_token_lookup_simulates_faster_than_128_tokens():
    def run(tokens: int) -> float:
        b = gx.GraphBuilder("emb")
        table = b.constant(np.zeros((30522, 384), np.float32), "table")
        b.output(b.Gather(table, b.input("ids", "int64", [1, tokens])))
        return gx.Session(b.build(), device="ascend910b").simulate().stats.makespan_us

    assert run(1) < run(128)


def test_a_pool_does_its_window_per_output():
    x, y = (2, 8, 10, 10), (2, 8, 8, 8)
    for op in ("MaxPool", "AveragePool", "LpPool"):
        c = node_cost(op, [x], F32 * 1600, [y], F32 * 1024, {"kernel_shape": [3, 3]}, False)
        assert c.flops == 1024 * 9 and c.bytes == F32 * (1600 + 1024) and c.unit == "vector"
    g = node_cost("GlobalAveragePool", [x], F32 * 1600, [(2, 8, 1, 1)], F32 * 16, {}, False)
    assert g.flops == 1600   # a global pool reads each input once
