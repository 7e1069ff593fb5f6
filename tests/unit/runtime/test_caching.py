"""The caching allocator: rounding, hits, split and coalesce, stream safety, engine use."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import graphexec as gx
from graphexec.runtime.caching import request_size


def test_rounding_hits_and_misses(rt):
    p = rt.malloc_cached(1000)
    rt.free_cached(p)
    q = rt.malloc_cached(900)
    assert q == p and request_size(1000) == 1056
    s = rt.memory_stats()
    assert (s.hits, s.misses) == (1, 1) and s.reserved_bytes == 2 * 1024 * 1024
    assert s.in_use_bytes == request_size(900)


def test_split_coalesce_and_empty_cache(rt):
    a, b, c = rt.malloc_cached(4000), rt.malloc_cached(4000), rt.malloc_cached(4000)
    assert b == a + request_size(4000) and c == b + request_size(4000)
    rt.free_cached(b)
    assert 0 < rt.memory_stats().fragmentation < 1   # a hole between a and c
    rt.free_cached(a)
    rt.free_cached(c)
    s = rt.memory_stats()
    assert s.in_use_bytes == 0 and s.fragmentation == 0.0
    rt.emulated_device().allocator.empty_cache()
    assert rt.memory_stats().reserved_bytes == 0


def test_block_used_on_another_stream_waits_for_its_event(rt):
    s1, s2 = rt.create_stream(), rt.create_stream()
    p = rt.malloc_cached(4096, s1)
    rt.launch_kernel(lambda ptr: None, 1, s2, p, flops=1e9, reads=[(p, 4096)], writes=[])
    rt.free_cached(p)
    q = rt.malloc_cached(4096, s1)
    assert q != p                      # s2's kernel may still read p
    rt.synchronize_device()
    r = rt.malloc_cached(4096, s1)
    assert r == p                      # the event completed: p is reusable
    assert (rt.memory_stats().hits, rt.memory_stats().misses) == (2, 1)  # q came from the same segment


def test_same_stream_reuse_needs_no_event(rt):
    s1 = rt.create_stream()
    p = rt.malloc_cached(4096, s1)
    rt.launch_kernel(lambda ptr: None, 1, s1, p, flops=1e9, reads=[(p, 4096)], writes=[])
    rt.free_cached(p)
    assert rt.malloc_cached(4096, s1) == p   # stream order already protects it


def test_double_free_is_an_error(rt):
    p = rt.malloc_cached(64)
    rt.free_cached(p)
    with pytest.raises(rt.AclError) as e:
        rt.free_cached(p)
    assert e.value.code == 107017


def test_engine_dynamic_tensors_come_from_the_cache():
    g = helper.make_graph([helper.make_node("NonZero", ["x"], ["nz"]), helper.make_node("Cast", ["nz"], ["y"], to=1)],
                          "dyn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    session = gx.Session(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
    x = np.eye(4, dtype=np.float32)
    first = session.run({"x": x})
    second = session.run({"x": x})
    np.testing.assert_array_equal(second.outputs["y"], np.nonzero(x))
    assert first.outputs["y"].tobytes() == second.outputs["y"].tobytes()
    stats = session.compiled.device.allocator.stats()
    assert stats.hits >= 1 and stats.in_use_bytes == 0


class _Scanning:
    """The plain best fit: every idle block scanned (what the bisected index must agree with)."""

    @staticmethod
    def best_fit(alloc, need, stream, small):
        rules = alloc.rules
        idle = [b for bs in alloc.segments.values() for b in bs if b.free and not b.events]
        fits = [(b.size, b.segment, b.offset, b) for b in idle if b.stream is stream and b.size >= need
                and (not rules.torch or (b.small == small and (rules.max_split_size is None or rules.fits(b, need))))]
        return min(fits)[3] if fits else None


def _check_segments(alloc) -> None:
    """Blocks tile each segment in address order, and no two free neighbours of one stream
    are left uncoalesced."""
    for base, blocks in alloc.segments.items():
        assert [b.offset for b in blocks] == [0] + [b.offset + b.size for b in blocks[:-1]]
        assert sum(b.size for b in blocks) == alloc.dev.memory.segment(base)[0].size
        for a, b in zip(blocks, blocks[1:]):
            assert not (a.free and b.free and a.stream is b.stream), (a, b)


@pytest.mark.parametrize("torch_rules", [False, True])
def test_bisected_best_fit_agrees_with_a_scan(torch_rules):
    """Random mallocs and frees on two streams (sizes across the small/large pools, a max
    split size for torch, some blocks used by both streams): every pointer equals what
    scanning every idle block picks, and the index holds exactly the idle blocks."""
    from dataclasses import replace

    from graphexec.runtime.caching import CANN, TORCH, CachingAllocator
    from graphexec.runtime.device import Device

    rules = replace(TORCH, max_split_size=4 << 20) if torch_rules else CANN

    class Scan(CachingAllocator):
        def _take(self, need, stream, small):
            block = _Scanning.best_fit(self, need, stream, small)
            if block is not None:
                self._unidle(block)
            return block

    rng = np.random.default_rng(7)
    allocs = []
    for cls in (CachingAllocator, Scan):
        dev = Device("ascend910")
        allocs.append((cls(dev, rules), [dev.default_stream, dev.create_stream()]))
    live: list[list[int]] = [[], []]
    for step in range(3000):
        if live[0] and rng.random() < 0.45:
            k = int(rng.integers(len(live[0])))
            for (a, _), ptrs in zip(allocs, live):
                a.free(ptrs.pop(k))
        else:
            size = int(rng.choice([rng.integers(1, 4096), rng.integers(4096, 1 << 20),
                                   rng.integers(1 << 20, 12 << 20)]))
            s = int(rng.integers(2))
            got = [a.malloc(size, streams[s]) for a, streams in allocs]
            assert got[0] == got[1]
            if rng.random() < 0.2:   # the other stream uses it too: its free waits on an event
                for a, streams in allocs:
                    a.note_use(got[0], streams[1 - s])
            for ptrs, p in zip(live, got):
                ptrs.append(p)
        if step % 10 == 0:
            _check_segments(allocs[0][0])
    fast = allocs[0][0]
    indexed = sorted(id(t[3]) for blocks in fast._idle.values() for t in blocks)
    assert indexed == sorted(id(b) for bs in fast.segments.values() for b in bs if b.free and not b.events)


def _plain_counts(events):
    """PyTorch's (current, peak, allocated, freed) per pool and stat, one event at a time."""
    from graphexec.runtime.caching import FREE, MALLOC, RELEASE, SEGMENT, STAT_NAMES, UNSEGMENT, Counters

    effect = {MALLOC: {"allocation": 1, "active": 1, "allocated_bytes": "size", "active_bytes": "size",
                       "requested_bytes": "asked"},
              FREE: {"allocation": -1, "allocated_bytes": "-size", "requested_bytes": "-asked"},
              RELEASE: {"active": -1, "active_bytes": "-size"},
              SEGMENT: {"segment": 1, "reserved_bytes": "size"}, UNSEGMENT: {"segment": -1, "reserved_bytes": "-size"}}
    out = {p: {s: [0, 0, 0, 0] for s in STAT_NAMES} for p in Counters.POOLS}
    for small, kind, size, asked in events:
        for stat, how in effect[kind].items():
            d = how if isinstance(how, int) else (-1 if how[0] == "-" else 1) * (size if "size" in how else asked)
            for pool in ("all", "small_pool" if small else "large_pool"):
                c = out[pool][stat]
                c[0] += d
                c[1] = max(c[1], c[0])
                c[2 if d > 0 else 3] += abs(d)
    return out


@pytest.mark.parametrize("seed", range(6))
def test_the_counters_fold_is_the_plain_count(seed):
    """The logged events folded by numpy, in chunks cut anywhere (the log's bound, a read),
    give PyTorch's four numbers of every stat exactly as counting each event does."""
    from graphexec.runtime.caching import STAT_NAMES, Counters

    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 3000))
    share = (0.5, 1.0, 0.0)[seed % 3]   # both pools, only small, only large
    events = [(bool(rng.random() < share), int(rng.integers(5)), int(rng.integers(0, 1 << 40)),
               int(rng.integers(0, 1 << 40))) for _ in range(n)]
    c = Counters()
    cuts = set(rng.integers(0, n, 5).tolist())
    for i, (small, kind, size, asked) in enumerate(events):
        c.append(small, kind, size, asked)
        if i in cuts:
            c.fold()
    want = _plain_counts(events)
    for pool in Counters.POOLS:
        for stat in STAT_NAMES:
            assert list(c.get(stat, pool)) == want[pool][stat], (pool, stat)
