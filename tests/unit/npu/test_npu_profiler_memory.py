"""An eager profile's memory section: the peak with the blocks held at it and the bytes each
op (launch) allocated, from the caching allocator's blocks and the launch each was taken for."""

from __future__ import annotations

import numpy as np

import graphexec.npu as npu
from graphexec.profiling.report_html import render
from graphexec.profiling.view_data import load

KB16 = 64 * 64 * 4   # one float32[64, 64]


def _chain() -> None:
    a = npu.tensor(np.ones((64, 64), np.float32))   # the upload's block
    b = a @ a
    c = (b + 1).relu()   # b + 1's block is given back once relu has its own
    del b
    s = c.sum()          # 4 bytes, after b is given back: not the peak
    s.numpy()


def test_eager_profile_has_the_peak_and_bytes_per_op(tmp_path):
    with npu.profiler.profile(tmp_path) as prof:
        _chain()
    view = load(prof.path)
    m = view.other["memory"]
    # the peak: the upload, MatMul, Add and Relu outputs all held when Relu takes its block
    assert m["peak_bytes"] == 4 * KB16 and m["live_count"] == 4
    assert sorted(op.split(" #")[0] for _, _, op in m["live"]) == ["Add", "MatMul", "Relu", "memcpy h2d"]
    assert all(b == KB16 for _, b, _ in m["live"])
    assert any(n.startswith("MatMul #") and "64,64" in n for n, _, _ in m["live"])
    per_op = {name.split(" #")[0]: (op, b, k) for name, op, b, k in m["per_op"]}
    assert per_op == {"memcpy h2d": ("memcpy", KB16, 1), "MatMul": ("MatMul", KB16, 1), "Add": ("Add", KB16, 1),
                      "Relu": ("Relu", KB16, 1), "ReduceSum": ("ReduceSum", 4, 1)}
    assert m["ops_allocating"] == 5 and m["samples"] and m["reserved_bytes"] >= m["peak_bytes"]
    page = render(view)
    assert "peak held 65,536 bytes" in page and 'class="sortable live"' in page
    assert 'class="sortable per-op-memory"' in page and "ReduceSum" in page


def test_blocks_taken_before_the_profile_are_left_out(tmp_path):
    kept = npu.tensor(np.ones((64, 64), np.float32))
    with npu.profiler.profile(tmp_path) as prof:
        y = kept + 1
        del kept
        y.numpy()
    m = load(prof.path).other["memory"]
    assert m["peak_bytes"] == KB16 and [op.split(" #")[0] for _, _, op in m["live"]] == ["Add"]
    assert not npu._tensor.MEMORY_HOOKS   # the profile's hook is gone once it stops
