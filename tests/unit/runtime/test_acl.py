"""The ACL-style API: each call's good path (the article's examples are in test_acl_article.py)."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from graphexec import acl

from acl_helpers import MB, download as _download, kernels as _kernels, scale as _scale, upload as _upload


# ---- devices, contexts, threads -------------------------------------------------------
def test_init_options_and_device_count(fresh):
    acl.init(profile="ascend910b", device_count=2)
    assert acl.get_device_count() == 2
    acl.set_device(1)
    assert acl.get_device() == 1 and acl.emulated_device().profile.name == "ascend910b"
    a, b = acl.malloc(64), None
    acl.set_device(0)
    b = acl.malloc(64)
    assert a != b and acl.view(a, np.uint8, (64,)).shape == (64,)


def test_set_device_is_refcounted_with_a_default_context_and_stream(rt):
    acl.set_device(0)                      # count 2
    ctx = acl.get_current_context()
    assert ctx is not None and ctx.is_default and ctx.default_stream is not None
    out = acl.malloc(16)
    acl.launch_kernel(lambda: acl.view(out, np.uint8, (16,)).fill(7), 1, None, writes=[out])  # default stream
    acl.synchronize_stream(None)
    acl.reset_device(0)                    # count 1: still open
    assert acl.view(out, np.uint8, (16,))[0] == 7
    acl.reset_device(0)                    # count 0: released
    assert acl.get_current_context() is None
    with pytest.raises(acl.AclError) as e:
        acl.malloc(16)
    assert e.value.code == 107002
    acl.reset_device(0)                    # already released: nothing to do


def test_nothing_stays_allocated_after_reset_device(rt):
    dev = acl.emulated_device()
    ptrs = [acl.malloc(n) for n in (100, MB + 1, 3 * MB)]
    s, ev = acl.create_stream(), acl.create_event()
    ctx = acl.create_context(0)
    acl.launch_kernel(lambda: None, 4, s, ptrs[0], flops=1e6)
    acl.record_event(ev, s)
    acl.set_current_context(dev.sim.streams[0].context)
    acl.reset_device(0)
    assert dev.memory.live() == [] and dev.memory.used == 0 and dev.sim.idle()
    assert s.destroyed and ev.destroyed and ctx.destroyed
    acl.set_device(0)                      # a fresh device: everything is free again
    free, total = acl.get_mem_info()
    assert free == total


def test_contexts_and_current_context_per_thread(rt):
    default = acl.get_current_context()
    ctx = acl.create_context(0)
    assert acl.get_current_context() is ctx
    seen = {}

    def worker() -> None:
        seen["before"] = acl.get_current_context()
        acl.set_current_context(default)
        seen["after"] = acl.get_current_context()
        seen["stream"] = acl.create_stream()

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    assert seen["before"] is None and seen["after"] is default
    assert seen["stream"].context is default and acl.get_current_context() is ctx
    s = acl.create_stream()
    assert s.context is ctx
    acl.destroy_context(ctx)
    assert s.destroyed and acl.get_current_context() is None
    acl.set_current_context(default)
    assert acl.get_device() == 0


# ---- streams and events ---------------------------------------------------------------
def test_stream_priority_is_clamped_to_0_7(rt):
    assert [acl.create_stream(priority=p).priority for p in (-5, 0, 3, 7, 99)] == [0, 0, 3, 7, 7]
    assert acl.create_stream().priority == 0


def test_destroy_stream_waits_for_its_tasks(rt):
    s = acl.create_stream()
    acl.launch_kernel(lambda: None, 1, s, flops=1e9, unit="vector")
    acl.destroy_stream(s)
    assert s.destroyed and acl.emulated_device().sim.finished[-1].kind == "kernel"


def test_event_query_synchronize_elapsed_and_reset(rt):
    s = acl.create_stream()
    start, end = acl.create_event(), acl.create_event()
    assert acl.query_event(start) == acl.EVENT_RECORDED_STATUS_COMPLETE     # never recorded
    acl.record_event(start, s)
    acl.launch_kernel(lambda: None, 32, s, flops=2e9, unit="vector", dtype="float32")
    acl.record_event(end, s)
    assert acl.query_event(end) == acl.EVENT_RECORDED_STATUS_NOT_READY
    acl.synchronize_event(end)
    assert acl.query_event(end) == acl.EVENT_RECORDED_STATUS_COMPLETE
    kernel = _kernels(s.id)[0]
    assert start.record_task.end_t < kernel.start_t and end.record_task.end_t == kernel.end_t
    assert acl.event_elapsed_time(start, end) == pytest.approx((kernel.end_t - start.record_task.end_t) / 1000)
    acl.reset_event(end, s)
    assert acl.query_event(end) == acl.EVENT_RECORDED_STATUS_COMPLETE
    acl.destroy_event(start)
    assert start.destroyed


def test_synchronize_device_waits_for_every_stream(rt):
    streams = [acl.create_stream() for _ in range(3)]
    for i, s in enumerate(streams):
        acl.launch_kernel(lambda: None, 2, s, flops=1e8 * (i + 1))
    acl.synchronize_device()
    dev = acl.emulated_device()
    assert dev.sim.idle() and dev.host_t >= max(t.end_t for t in dev.sim.finished)


# ---- memory ---------------------------------------------------------------------------
@pytest.mark.parametrize("size, policy, reserved", [
    (1, acl.MEM_MALLOC_HUGE_FIRST, 4096),                 # 32 + 32 bytes, normal pages
    (MB - 64, acl.MEM_MALLOC_HUGE_FIRST, MB),             # exactly 1 MB after +32: normal pages
    (MB, acl.MEM_MALLOC_HUGE_FIRST, 2 * MB),              # over 1 MB: huge pages
    (3 * MB, acl.MEM_MALLOC_NORMAL_ONLY, 3 * MB + 4096),
    (1, acl.MEM_MALLOC_HUGE_ONLY, 2 * MB),
])
def test_malloc_rounds_like_cann(rt, size, policy, reserved):
    free0, _ = acl.get_mem_info()
    ptr = acl.malloc(size, policy)
    assert ptr % 64 == 0
    assert free0 - acl.get_mem_info()[0] == reserved
    acl.free(ptr)
    assert acl.get_mem_info()[0] == free0


def test_malloc_host_and_free_host(rt):
    h = acl.malloc_host(256)
    assert h.dtype == np.uint8 and h.shape == (256,) and not h.any()
    acl.free_host(h)


@pytest.mark.parametrize("kind", ["h2h", "h2d", "d2h", "d2d", "default"])
def test_memcpy_all_kinds(rt, kind):
    src_h = np.arange(64, dtype=np.float32)
    dst_h = np.zeros(64, np.float32)
    src_d, dst_d = _upload(src_h), acl.malloc(256)
    src, dst, code = {"h2h": (src_h, dst_h, acl.MEMCPY_HOST_TO_HOST),
                      "h2d": (src_h, dst_d, acl.MEMCPY_HOST_TO_DEVICE),
                      "d2h": (src_d, dst_h, acl.MEMCPY_DEVICE_TO_HOST),
                      "d2d": (src_d, dst_d, acl.MEMCPY_DEVICE_TO_DEVICE),
                      "default": (src_d, dst_d, acl.MEMCPY_DEFAULT)}[kind]
    acl.memcpy(dst, 256, src, 256, code)
    got = dst if isinstance(dst, np.ndarray) else _download(dst, 64)
    np.testing.assert_array_equal(got, src_h)


@pytest.mark.parametrize("code", [acl.MEMCPY_HOST_TO_HOST, acl.MEMCPY_HOST_TO_DEVICE, acl.MEMCPY_DEVICE_TO_HOST,
                                  acl.MEMCPY_DEVICE_TO_DEVICE, acl.MEMCPY_DEFAULT])
def test_memcpy_async_with_pinned_memory_lands_at_the_copy_end(rt, code):
    s = acl.create_stream()
    src_h, dst_h = acl.malloc_host(4096), acl.malloc_host(4096)
    src_h[:] = np.arange(4096) % 251
    src_d, dst_d = _upload(src_h), acl.malloc(4096)
    host_src = code in (acl.MEMCPY_HOST_TO_HOST, acl.MEMCPY_HOST_TO_DEVICE)
    host_dst = code in (acl.MEMCPY_HOST_TO_HOST, acl.MEMCPY_DEVICE_TO_HOST)
    src, dst = (src_h if host_src else src_d), (dst_h if host_dst else dst_d)
    acl.memcpy_async(dst, 4096, src, 4096, code, s)
    landed = (lambda: dst_h.copy()) if host_dst else (lambda: acl.view(dst_d, np.uint8, (4096,)).copy())
    assert not landed().any()                      # asynchronous: nothing copied yet
    acl.synchronize_stream(s)
    np.testing.assert_array_equal(landed(), src_h)
    copy = acl.emulated_device().sim.finished[-1]
    assert copy.kind == "memcpy" and copy.end_t > copy.start_t


def test_memcpy_async_with_pageable_memory_blocks(rt):
    s = acl.create_stream()
    d = acl.malloc(4096)
    acl.memcpy_async(d, 4096, np.full(4096, 9, np.uint8), 4096, acl.MEMCPY_HOST_TO_DEVICE, s)
    assert (acl.view(d, np.uint8, (4096,)) == 9).all()


def test_memset_and_memset_async(rt):
    d = acl.malloc(100)
    acl.memset(d, 100, 0xAB, 60)
    v = acl.view(d, np.uint8, (100,))
    assert (v[:60] == 0xAB).all() and not v[60:].any()
    s = acl.create_stream()
    acl.memset_async(d, 100, 1, 100, s)
    assert v[0] == 0xAB
    acl.synchronize_stream(s)
    assert (v == 1).all()


def test_get_mem_info(rt):
    free, total = acl.get_mem_info(acl.HBM_MEM)
    assert total == acl.emulated_device().profile.hbm_capacity_bytes and free == total


# ---- kernels and callbacks --------------------------------------------------------------
def test_launch_registered_kernel_on_tensor_descriptors(rt):
    a, b = np.arange(6, dtype=np.float32).reshape(2, 3), np.full((2, 3), 10, np.float32)
    d_a, d_b, d_c = _upload(a.ravel()), _upload(b.ravel()), acl.malloc(24)
    t = [acl.tensor(p, np.float32, (2, 3)) for p in (d_a, d_b, d_c)]
    s = acl.create_stream()
    acl.launch_kernel("Add", 1, s, *t)
    acl.synchronize_stream(s)
    np.testing.assert_array_equal(_download(d_c, 6).reshape(2, 3), a + b)
    task = _kernels(s.id)[0]
    assert task.unit == "vector" and task.bytes == 72 and task.reads and task.writes


def test_launched_int8_gemm_runs_at_the_int8_rate(rt):
    """A cube kernel's peak rate is its operands' dtype: MatMulInteger int8 x int8 -> int32 runs
    at the int8 rate, 4x float32's on the ascend910 profile."""
    s = acl.create_stream()
    outs = []
    for op, dt, out in (("MatMulInteger", np.int8, np.int32), ("MatMul", np.float32, np.float32)):
        ins = [acl.tensor(_upload(np.ones(64 * 64, dt)), dt, (64, 64)) for _ in range(2)]
        outs.append(acl.tensor(acl.malloc(64 * 64 * 4), out, (64, 64)))
        acl.launch_kernel(op, 1, s, *ins, outs[-1], flops=1e12)
    acl.synchronize_stream(s)
    assert (acl.view(*outs[0]) == 64).all()
    i8, f32 = _kernels(s.id)
    p = acl.emulated_device().profile
    assert (i8.unit, i8.dtype, f32.dtype) == ("cube", "int8", "float32")
    cube = p.kernels.cube   # one block: its fixed cost and one item's fill, then the work at the achieved rate
    eff = {d: cube.efficiency.get(d) or cube.efficiency["default"] for d in ("int8", "float32")}
    ratio = p.peak_tflops.cube["int8"] * eff["int8"] / (p.peak_tflops.cube["float32"] * eff["float32"])
    busy = lambda k: k.end_t - k.start_t - p.task_overhead_us - cube.block_fixed_us - cube.item_fill_us  # noqa: E731
    assert busy(f32) == pytest.approx(ratio * busy(i8))


def test_launch_callable_with_values_and_cost(rt):
    d = _upload(np.ones(8, np.float32))
    s = acl.create_stream()
    acl.launch_kernel(_scale, 1, s, d, d, 8, 5.0, flops=1e9, bytes=64, unit="vector", dtype="float32")
    dev = acl.emulated_device()
    assert dev.host_t == pytest.approx(dev.launches[-1].end)        # asynchronous: host not blocked
    acl.synchronize_stream(s)
    np.testing.assert_array_equal(_download(d, 8), np.full(8, 5.0, np.float32))
    k = _kernels(s.id)[0]
    p = dev.profile
    v = p.kernels.vector   # one block: fixed cost, one item's fill, the work at the achieved vector rate
    rate = p.peak_tflops.vector["float32"] * 1e6 / p.vector_cores * v.efficiency["default"]
    assert k.end_t - k.start_t == pytest.approx(p.task_overhead_us + v.block_fixed_us + v.item_fill_us + 1e9 / rate)


def test_launch_callback_runs_in_stream_order(rt):
    s = acl.create_stream()
    d = acl.malloc(4)
    seen = []
    acl.launch_kernel(lambda: acl.view(d, np.float32, (1,)).fill(3.0), 1, s, writes=[d], flops=1e6)
    acl.launch_callback(lambda data: seen.append((data, float(acl.view(d, np.float32, (1,))[0]))), "tag",
                        acl.CALLBACK_BLOCK, s)
    acl.launch_callback(seen.append, "second", acl.CALLBACK_NO_BLOCK, s)
    assert seen == []
    acl.synchronize_stream(s)
    assert seen == [("tag", 3.0), "second"]
    kinds = [t.kind for t in acl.emulated_device().sim.finished if t.stream is s]
    assert kinds == ["kernel", "callback", "callback"]


def test_view_is_a_numpy_view_of_device_memory(rt):
    d = acl.malloc(16)
    acl.view(d, np.int32, (4,))[...] = [1, 2, 3, 4]
    np.testing.assert_array_equal(acl.view(d + 8, np.int32, (2,)), [3, 4])
