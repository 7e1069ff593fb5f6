"""StatsPlan's index arrays, built from flat lists, against the per-kernel loop that made
them first (random plans with aliases, roots written twice, unsized and unwritten
tensors), and a plan of more kernels than a walk takes: no walk, the same stats."""

from __future__ import annotations

import random

import numpy as np
import pytest
from dags import random_dag
from test_run_stats import _both, _random_plan

import graphexec as gx
from graphexec.engine import run_stats
from graphexec.engine.run_stats import StatsPlan
from graphexec.runtime.profiles import load_profile


def _plain_arrays(kernels, sizes, root):
    """(roots, w_root, w_kernel, w_start, r_root, r_kernel) as the first StatsPlan made them."""
    writers: dict[str, list[int]] = {}
    readers: list[tuple[str, int]] = []
    for i, k in enumerate(kernels):
        for name in k.writes:
            r = root(name)
            if r in sizes:
                writers.setdefault(r, []).append(i)
        readers += [(r, i) for r in map(root, k.reads) if r in sizes]
    roots = list(writers)
    slot = {r: j for j, r in enumerate(roots)}
    kept = [(slot[r], i) for r, i in readers if r in slot]
    return (roots, np.repeat(np.arange(len(roots)), [len(w) for w in writers.values()]),
            np.array([i for w in writers.values() for i in w], dtype=np.intp),
            np.cumsum([0] + [len(w) for w in writers.values()][:-1]).astype(np.intp),
            np.array([r for r, _ in kept], dtype=np.intp), np.array([i for _, i in kept], dtype=np.intp))


@pytest.mark.parametrize("seed", range(3))
def test_index_arrays_equal_the_per_kernel_loop(seed):
    rng = random.Random(seed)
    profile = load_profile("ascend910")
    for _ in range(200):
        kernels, sizes, root = _random_plan(rng)
        plan = StatsPlan(kernels, {k.id: i for i, k in enumerate(kernels)}, sizes, root, profile)
        roots, *arrays = _plain_arrays(kernels, sizes, root)
        assert plan.roots == roots
        for got, want in zip((plan.w_root, plan.w_kernel, plan.w_start, plan.r_root, plan.r_kernel), arrays):
            assert got.dtype == want.dtype and got.tolist() == want.tolist()


def test_a_plan_past_the_walk_size_takes_the_array_passes(monkeypatch):
    session = gx.Session(random_dag(np.random.default_rng(5), run_stats.WALK_MAX + 40), streams=3,
                         compute=False, fusion=False)   # one task per node: past the walk size
    result = session.simulate(None)
    compiled = session.compile(None)
    assert len(compiled._kernels) > run_stats.WALK_MAX and not compiled.stats_plan.info
    assert compiled.stats_plan.walk(result.run.tasks, compiled.profile) is None
    fast, plain = _both(compiled, monkeypatch)
    assert repr(fast) == repr(plain) == repr(result.stats)
