"""Every error of the ACL-style API, with the real runtime's code and name."""

from __future__ import annotations

import numpy as np
import pytest

from graphexec.errors import GraphExecError
from graphexec import acl
from graphexec.runtime.profiles import load_profile

SMALL = load_profile("ascend910").model_copy(update={
    "name": "small", "max_streams": 4, "max_events": 3, "hbm_capacity_bytes": 64 * 1024 * 1024})


def _fails(code: int, name: str, fn, *args, **kwargs) -> acl.AclError:
    with pytest.raises(acl.AclError) as info:
        fn(*args, **kwargs)
    err = info.value
    assert (err.code, err.name) == (code, name), str(err)
    assert isinstance(err, GraphExecError) and "\n" not in str(err) and name in str(err)
    return err


@pytest.fixture
def small(fresh):
    acl.init(profile=SMALL, device_count=2)
    acl.set_device(0)
    return acl


# ---- initialization, devices, contexts --------------------------------------------------
def test_init_twice_and_finalize_without_init(fresh):
    _fails(100001, "ACL_ERROR_UNINITIALIZE", acl.set_device, 0)
    _fails(100001, "ACL_ERROR_UNINITIALIZE", acl.malloc, 16)
    _fails(100037, "ACL_ERROR_REPEAT_FINALIZE", acl.finalize)
    acl.init()
    _fails(100002, "ACL_ERROR_REPEAT_INITIALIZE", acl.init)


def test_invalid_device_id(small):
    _fails(107001, "ACL_ERROR_RT_INVALID_DEVICEID", acl.set_device, 2)
    _fails(107001, "ACL_ERROR_RT_INVALID_DEVICEID", acl.create_context, -1)


def test_no_current_context(fresh):
    acl.init()
    _fails(107002, "ACL_ERROR_RT_CONTEXT_NULL", acl.create_stream)
    _fails(107002, "ACL_ERROR_RT_CONTEXT_NULL", acl.synchronize_device)


def test_use_after_destroy(rt):
    s, ev = acl.create_stream(), acl.create_event()
    ctx = acl.create_context(0)
    other = acl.create_stream()
    acl.destroy_stream(other)
    _fails(107017, "ACL_ERROR_RT_INVALID_HANDLE", acl.launch_kernel, lambda: None, 1, other)
    _fails(107017, "ACL_ERROR_RT_INVALID_HANDLE", acl.destroy_stream, other)
    acl.destroy_event(ev)
    acl.set_current_context(s.context)
    _fails(107017, "ACL_ERROR_RT_INVALID_HANDLE", acl.record_event, ev, s)
    _fails(107017, "ACL_ERROR_RT_INVALID_HANDLE", acl.query_event, ev)
    acl.destroy_context(ctx)
    _fails(107017, "ACL_ERROR_RT_INVALID_HANDLE", acl.set_current_context, ctx)
    _fails(107017, "ACL_ERROR_RT_INVALID_HANDLE", acl.destroy_context, ctx)


def test_default_context_and_stream_cannot_be_destroyed(rt):
    ctx = acl.get_current_context()
    _fails(107000, "ACL_ERROR_RT_PARAM_INVALID", acl.destroy_context, ctx)
    _fails(107000, "ACL_ERROR_RT_PARAM_INVALID", acl.destroy_stream, ctx.default_stream)


def test_stream_of_another_device(small):
    s0 = acl.create_stream()
    acl.set_device(1)
    _fails(107003, "ACL_ERROR_RT_STREAM_CONTEXT", acl.launch_kernel, lambda: None, 1, s0)


# ---- memory -------------------------------------------------------------------------------
def test_double_free_and_never_allocated(rt):
    d = acl.malloc(64)
    acl.free(d)
    err = _fails(107017, "ACL_ERROR_RT_INVALID_HANDLE", acl.free, d)
    assert "already freed" in str(err)
    e = acl.malloc(64)
    err = _fails(107017, "ACL_ERROR_RT_INVALID_HANDLE", acl.free, e + 8)
    assert "not the start" in str(err)
    _fails(107017, "ACL_ERROR_RT_INVALID_HANDLE", acl.free, 12345)
    _fails(100000, "ACL_ERROR_INVALID_PARAM", acl.free, None)
    h = acl.malloc_host(8)
    acl.free_host(h)
    _fails(107017, "ACL_ERROR_RT_INVALID_HANDLE", acl.free_host, h)
    _fails(107017, "ACL_ERROR_RT_INVALID_HANDLE", acl.free_host, np.zeros(8, np.uint8))


def test_allocation_beyond_hbm(small):
    _fails(207001, "ACL_ERROR_RT_MEMORY_ALLOCATION", acl.malloc, 64 * 1024 * 1024 + 1)
    d = acl.malloc(40 * 1024 * 1024)
    _fails(207001, "ACL_ERROR_RT_MEMORY_ALLOCATION", acl.malloc, 30 * 1024 * 1024)
    acl.free(d)
    acl.free(acl.malloc(30 * 1024 * 1024))


def test_bad_malloc_arguments(rt):
    _fails(100000, "ACL_ERROR_INVALID_PARAM", acl.malloc, 0)
    _fails(100000, "ACL_ERROR_INVALID_PARAM", acl.malloc, 64, 9)
    _fails(100000, "ACL_ERROR_INVALID_PARAM", acl.malloc_host, -1)


def test_copy_past_the_end_of_an_allocation(rt):
    d = acl.malloc(100)
    h = np.zeros(200, np.uint8)
    _fails(107000, "ACL_ERROR_RT_PARAM_INVALID", acl.memcpy, d, 200, h, 101, acl.MEMCPY_HOST_TO_DEVICE)
    _fails(107000, "ACL_ERROR_RT_PARAM_INVALID", acl.memcpy, h, 200, d + 50, 51, acl.MEMCPY_DEVICE_TO_HOST)
    s = acl.create_stream()
    _fails(107000, "ACL_ERROR_RT_PARAM_INVALID", acl.memcpy_async, d + 99, 8, h, 2, acl.MEMCPY_HOST_TO_DEVICE, s)
    _fails(107000, "ACL_ERROR_RT_PARAM_INVALID", acl.memset, d + 90, 20, 0, 20)
    _fails(107000, "ACL_ERROR_RT_PARAM_INVALID", acl.launch_kernel, lambda: None, 1, s, writes=[(d, 101)])
    acl.memcpy(d, 100, h, 100, acl.MEMCPY_HOST_TO_DEVICE)      # exactly to the end is fine


def test_bad_copy_arguments(rt):
    d, h = acl.malloc(64), np.zeros(64, np.uint8)
    _fails(100000, "ACL_ERROR_INVALID_PARAM", acl.memcpy, d, 32, h, 64, acl.MEMCPY_HOST_TO_DEVICE)  # > dest_max
    _fails(100000, "ACL_ERROR_INVALID_PARAM", acl.memcpy, d, 64, h, 64, 17)
    _fails(100000, "ACL_ERROR_INVALID_PARAM", acl.memcpy, h, 64, d, 64, acl.MEMCPY_HOST_TO_DEVICE)
    _fails(100000, "ACL_ERROR_INVALID_PARAM", acl.memcpy, d, 128, np.zeros(8, np.uint8), 128,
           acl.MEMCPY_HOST_TO_DEVICE)
    _fails(100000, "ACL_ERROR_INVALID_PARAM", acl.memset, d, 64, 300, 8)
    _fails(100000, "ACL_ERROR_INVALID_PARAM", acl.get_mem_info, acl.DDR_MEM)


# ---- streams, events, limits -------------------------------------------------------------
def test_too_many_streams_and_events(small):
    streams = [acl.create_stream() for _ in range(3)]      # + the default stream = 4
    _fails(207008, "ACL_ERROR_RT_NO_STREAM_RESOURCE", acl.create_stream)
    acl.destroy_stream(streams[0])
    acl.create_stream()
    events = [acl.create_event() for _ in range(3)]
    _fails(207007, "ACL_ERROR_RT_NO_EVENT_RESOURCE", acl.create_event)
    acl.destroy_event(events[0])
    acl.create_event()


def test_wait_on_a_never_recorded_event(rt):
    ev = acl.create_event()
    err = _fails(107000, "ACL_ERROR_RT_PARAM_INVALID", acl.stream_wait_event, acl.create_stream(), ev)
    assert "never recorded" in str(err)


def test_elapsed_time_errors(rt):
    s1, s2 = acl.create_stream(), acl.create_stream()
    a, b, c = acl.create_event(), acl.create_event(), acl.create_event()
    _fails(107006, "ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID", acl.event_elapsed_time, a, b)
    acl.record_event(a, s1)
    acl.launch_kernel(lambda: None, 1, s1, flops=1e9)
    acl.record_event(b, s1)
    acl.record_event(c, s2)
    _fails(107000, "ACL_ERROR_RT_PARAM_INVALID", acl.event_elapsed_time, a, c)     # across streams
    _fails(507006, "ACL_ERROR_RT_EVENT_NOT_COMPLETE", acl.event_elapsed_time, a, b)
    acl.synchronize_device()
    _fails(107007, "ACL_ERROR_RT_EVENT_TIMESTAMP_REVERSAL", acl.event_elapsed_time, b, a)
    assert acl.event_elapsed_time(a, b) > 0


# ---- launches -----------------------------------------------------------------------------
def test_bad_launches(rt):
    s = acl.create_stream()
    _fails(100000, "ACL_ERROR_INVALID_PARAM", acl.launch_kernel, lambda: None, 0, s)
    _fails(100000, "ACL_ERROR_INVALID_PARAM", acl.launch_kernel, lambda: None, 65536, s)
    _fails(100000, "ACL_ERROR_INVALID_PARAM", acl.launch_kernel, 42, 1, s)
    _fails(100000, "ACL_ERROR_INVALID_PARAM", acl.launch_kernel, lambda: None, 1, s, unit="gpu")
    _fails(100000, "ACL_ERROR_INVALID_PARAM", acl.launch_kernel, lambda: None, 1, "stream")
    _fails(507027, "ACL_ERROR_RT_KERNEL_LOOKUP", acl.launch_kernel, "NoSuchOp", 1, s)
    _fails(100000, "ACL_ERROR_INVALID_PARAM", acl.launch_kernel, "Relu", 1, s, acl.malloc(4))
    _fails(100000, "ACL_ERROR_INVALID_PARAM", acl.launch_callback, print, None, 5, s)


def test_a_failing_kernel_surfaces_at_synchronize(rt):
    s = acl.create_stream()

    def broken() -> None:
        raise ZeroDivisionError("boom")

    acl.launch_kernel(broken, 1, s)                      # asynchronous: no error yet
    err = _fails(507015, "ACL_ERROR_RT_AICORE_EXCEPTION", acl.synchronize_stream, s)
    assert "boom" in str(err) and isinstance(err.__cause__, ZeroDivisionError)
    acl.synchronize_stream(s)                            # reported once
