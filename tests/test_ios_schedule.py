"""IOS's schedules as benchmarks/ios_schedule.py builds and times them, on small graphs whose
stages, synchronizes and dynamic-program choices are worked out by hand."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import ios_schedule as S  # noqa: E402

import graphexec as gx  # noqa: E402


def _block() -> gx.Graph:
    """x -> conv a (+relu), conv b (+relu) in parallel -> concat -> conv c (+relu)."""
    b = gx.GraphBuilder("block", opset=17)
    x = b.input("x", "float32", ["n", 8, 16, 16])
    w = np.zeros((8, 8, 1, 1), np.float32)
    bias = np.zeros(8, np.float32)
    ya = b.Relu(b.Conv(x, w, bias))
    yb = b.Relu(b.Conv(x, w, bias))
    cat = b.Concat(ya, yb, axis=1)
    b.output(b.Relu(b.Conv(cat, np.zeros((8, 16, 1, 1), np.float32), bias)))
    return b.build()


def test_operators_blocks_and_greedy_stages():
    g = S.typed(_block(), 1)
    nodes, preds = S.operators(g)
    assert [[g.nodes[i].op for i in ns] for ns in nodes] == [["Conv", "Relu"], ["Conv", "Relu"], ["Concat"],
                                                           ["Conv", "Relu"]]
    assert preds == [set(), set(), {0, 1}, {2}]
    assert S.blocks(preds) == [[0, 1, 2], [3]]   # the concat is crossed by every path: an exit
    stages = S.greedy(preds)
    assert stages == [[[0], [1]], [[2]], [[3]]]
    assert S.syncs(stages) == [True, False, False]   # none between two one-group stages
    assert S.stretches(stages) == [[[0], [1]], [[2, 3]]]


def test_a_schedule_costs_its_stretches_and_a_round_trip_per_synchronize():
    g = S.typed(_block(), 1)
    nodes, preds = S.operators(g)
    stages = S.greedy(preds)
    first = S._stretch_us(g, [nodes[0], nodes[1]], "nvidia-v100")
    second = S._stretch_us(g, [nodes[3]], "nvidia-v100")   # the concat has no kernel
    total = S.run_schedule(g, nodes, stages, "nvidia-v100")
    assert total == pytest.approx(first + second + S.round_trip_us("nvidia-v100"))
    assert S.round_trip_us("nvidia-v100") == 23.0 + 5.0   # sync_return_us + launch_cost_us


@pytest.mark.parametrize("sync, parallel", [(5.0, True), (15.0, False)])
def test_the_dynamic_program_runs_in_parallel_only_when_it_beats_the_synchronize(sync, parallel):
    # a and b: 10 us each, alone on a tenth of the device; together 10 us + sync, one after the other 20 us
    ops = S.Ops([[0], [1], [2]], [set(), set(), {0, 1}], [10.0, 10.0, 1.0], [1.0, 1.0, 0.1])
    stages = S.ios_parallel(ops, sync)
    if parallel:
        assert sorted(stages[0]) == [[0], [1]] and stages[1] == [[2]]
    else:
        assert all(len(stage) == 1 for stage in stages) and len(stages) == 2   # [a], then [b, exit]


def test_a_stage_is_no_faster_than_its_core_time():
    ops = S.Ops([[0], [1]], [set(), set()], [10.0, 10.0], [9.0, 9.0])   # each holds 90% of the cores
    assert S._stage_us([[0], [1]], ops, 0.0) == 18.0


def test_convs_of_one_input_merge_into_one_conv_of_all_their_channels():
    g = S.typed(_block(), 2)
    nodes, _ = S.operators(g)
    merged = S.merged_conv_us(g, nodes, (0, 1), "nvidia-v100")
    b = gx.GraphBuilder("one", opset=17)   # by hand: 8 -> 16 channels, 1x1, with its Relu
    y = b.Conv(b.input("x", "float32", [2, 8, 16, 16]), np.zeros((16, 8, 1, 1), np.float32),
               np.zeros(16, np.float32))
    b.output(b.Relu(y))
    alone = gx.Session(b.build(), device="nvidia-v100").simulate(shapes={"x": (2, 8, 16, 16)}).stats.makespan_us
    assert merged == pytest.approx(alone)
    assert S.merged_conv_us(g, nodes, (0, 3), "nvidia-v100") is None   # c reads the concat, not x


def test_the_dynamic_program_merges_when_the_merged_conv_is_the_cheapest_stage():
    # a and b: 10 us each; run together on two streams 10 us + a 15 us synchronize; merged 12 us
    ops = S.Ops([[0], [1], [2]], [set(), set(), {0, 1}], [10.0, 10.0, 1.0], [1.0, 1.0, 0.1],
                merged_us=lambda combo: 12.0 if combo == (0, 1) else None)
    stages, merged = S.ios_both(ops, 15.0)
    assert merged == [(0, 1)] and stages == [[[0, 1]], [[2]]]
    ops.merged_us = lambda combo: None   # nothing may merge: one after the other (20 us) beats 25
    stages, merged = S.ios_both(ops, 15.0)
    assert merged == [] and all(len(stage) == 1 for stage in stages)


def test_a_merged_stage_is_timed_as_its_conv_and_needs_no_synchronize():
    g = S.typed(_block(), 1)
    nodes, _ = S.operators(g)
    schedule = [[[0, 1]], [[2]], [[3]]]
    total = S.run_schedule(g, nodes, schedule, "nvidia-v100", [(0, 1)])
    assert S.syncs(schedule) == [False, False, False]
    assert total == pytest.approx(S.merged_conv_us(g, nodes, (0, 1), "nvidia-v100")
                                  + S._stretch_us(g, [nodes[3]], "nvidia-v100"))
