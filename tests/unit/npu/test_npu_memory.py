"""The caching allocator against PyTorch's documented CUDACachingAllocator semantics."""

from __future__ import annotations

import numpy as np
import pytest

import graphexec.npu as npu
from graphexec.errors import DeviceError

MiB = 1024 * 1024


def test_rounding_and_segment_sizes():
    a = npu.empty(1, dtype=np.uint8)                    # 1 byte -> one 512-byte block
    assert npu.memory_allocated() == 512 and npu.memory_reserved() == 2 * MiB
    b = npu.empty(513, dtype=np.uint8)                  # -> 1024
    assert npu.memory_allocated() == 512 + 1024
    d = npu.empty(12 * MiB + 1, dtype=np.uint8)         # above 10 MiB: its size rounded to 2 MiB
    assert npu.memory_reserved() == 2 * MiB + 14 * MiB
    c = npu.empty(3 * MiB // 4, dtype=np.float32)       # 3 MiB: large, a 20 MiB segment (d's rest is 2 MiB)
    assert npu.memory_reserved() == 2 * MiB + 14 * MiB + 20 * MiB
    e = npu.empty(12 * MiB // 4, dtype=np.float32)      # 12 MiB: cut from c's segment's 17 MiB rest
    assert npu.memory_reserved() == 36 * MiB
    stats = npu.memory_stats()
    assert stats["segment.small_pool.current"] == 1 and stats["segment.large_pool.current"] == 2
    assert stats["allocation.all.current"] == 5
    del a, b, c, d, e


def test_freed_block_is_reused_on_its_stream():
    x = npu.empty(1000)
    ptr = x._store.ptr
    del x
    assert npu.memory_allocated() == 0 and npu.memory_reserved() == 2 * MiB
    y = npu.empty(900)
    assert y._store.ptr == ptr


def test_small_requests_never_take_large_blocks():
    big = npu.empty(2 * MiB // 4)
    del big                                             # a free 20 MiB large segment
    small = npu.empty(100)
    assert npu.memory_stats()["segment.small_pool.current"] == 1 and small.is_npu


def test_no_reuse_across_streams_before_record_streams_event():
    s1 = npu.Stream()
    x = npu.empty(512, 512)
    ptr = x._store.ptr
    with npu.stream(s1):
        for _ in range(20):
            y = x @ x            # s1 reads x for longer than the host takes to launch it all
    x.record_stream(s1)
    del x
    z = npu.empty(512, 512)
    assert z._store.ptr != ptr                         # s1 may still be reading it
    npu.synchronize()
    del z, y
    w = npu.empty(512, 512)
    assert w._store.ptr == ptr                         # its event passed: reusable


def test_without_record_stream_the_block_is_reused_at_once():
    s1 = npu.Stream()
    x = npu.empty(256, 256)
    ptr = x._store.ptr
    with npu.stream(s1):
        y = npu.ops.exp(x)
    del x
    assert npu.empty(256, 256)._store.ptr == ptr       # PyTorch's rule: the program must record_stream
    del y


def test_empty_cache_returns_unused_segments():
    keep = npu.empty(100)
    drop = npu.empty(3 * MiB // 4)
    del drop
    assert npu.memory_reserved() == 22 * MiB
    npu.empty_cache()
    assert npu.memory_reserved() == 2 * MiB and npu.memory_allocated() == 512
    del keep


def test_peaks_and_reset():
    x = npu.empty(MiB // 4)
    del x
    assert npu.max_memory_allocated() == MiB and npu.memory_allocated() == 0
    npu.reset_peak_memory_stats()
    assert npu.max_memory_allocated() == 0
    assert "allocated_bytes (all)" in npu.memory_summary()


def test_max_split_size_keeps_big_blocks_whole(monkeypatch):
    monkeypatch.setenv("PYTORCH_NPU_ALLOC_CONF", "max_split_size_mb:32")
    npu.init()
    a = npu.empty(40 * MiB // 4)
    del a
    b = npu.empty(2 * MiB // 4)          # below max_split: the 40 MiB block is not cut
    assert npu.memory_reserved() == 40 * MiB + 20 * MiB
    c = npu.empty(40 * MiB // 4)         # oversize request takes the oversize block whole
    assert npu.memory_allocated() == 2 * MiB + 40 * MiB
    del b, c


def test_expandable_segments_reserve_pages(monkeypatch):
    monkeypatch.setenv("PYTORCH_NPU_ALLOC_CONF", "expandable_segments:True")
    npu.init()
    a = npu.empty(3 * MiB // 4)
    assert npu.memory_reserved() == 4 * MiB
    del a


@pytest.mark.parametrize("conf", ["max_split_size_mb:10", "bogus:1", "expandable_segments:yes", "nocolon"])
def test_bad_alloc_conf_is_one_line(monkeypatch, conf):
    monkeypatch.setenv("PYTORCH_NPU_ALLOC_CONF", conf)
    npu.init()
    with pytest.raises(DeviceError) as e:
        npu.empty(4)
    assert "PYTORCH_NPU_ALLOC_CONF" in str(e.value) and "\n" not in str(e.value)
