"""Issue 39, class 5 (eager and ACL calls check their arguments), the ACL half: each public
ACL entry called with an argument of the wrong kind, a handle of the wrong kind or a handle
already destroyed, with its exact line. Every one was a raw TypeError or AttributeError, or a
silent wrong call, before ``runtime/argcheck.py`` (then ``acl/_args.py``) checked every entry's arguments against its
annotations. Counted with round_three.py's eager class.
"""

from __future__ import annotations

from typing import Any, Callable

from hardening.round_two_api import ApiCase, _acl

from graphexec import acl
from graphexec.errors import AclError

INVALID = "ACL_ERROR_INVALID_PARAM (100000): "
HANDLE = "ACL_ERROR_RT_INVALID_HANDLE"


def _destroyed_stream(s: Any) -> Any:
    gone = acl.create_stream()
    acl.destroy_stream(gone)
    return acl.synchronize_stream(gone)


def _destroyed_event(s: Any) -> Any:
    ev = acl.create_event()
    acl.destroy_event(ev)
    return acl.record_event(ev, s)


def _freed(s: Any) -> Any:
    p = acl.malloc(64)
    acl.free(p)
    return acl.memset(p, 64, 0, 64)


def _case(name: str, fn: Callable[[Any], Any], message: str) -> ApiCase:
    return ApiCase("eager", f"acl_{name}", _acl(fn), AclError, message)


ACL = [
    _case("tensor_of_nones", lambda s: acl.tensor(None, None, None),
          INVALID + "acl.tensor: ptr must be an int, got None"),
    _case("tensor_of_a_bogus_dtype", lambda s: acl.tensor(acl.malloc(64), "bogus", [4]),
          INVALID + "tensor dtype 'bogus' is not a numpy dtype"),
    _case("record_event_swapped", lambda s: acl.record_event(s, acl.create_event()),
          INVALID + "acl.record_event: event must be an Event, got Stream(1)"),
    _case("wait_on_a_stream", lambda s: acl.stream_wait_event(s, s),
          INVALID + "acl.stream_wait_event: event must be an Event, got Stream(1)"),
    _case("malloc_none", lambda s: acl.malloc(None), INVALID + "acl.malloc: size must be an int, got None"),
    _case("malloc_a_float", lambda s: acl.malloc(64.0), INVALID + "acl.malloc: size must be an int, got 64.0"),
    _case("memset_text_value", lambda s: acl.memset(acl.malloc(64), 64, "x", 4),
          INVALID + "acl.memset: value must be an int, got 'x'"),
    _case("memcpy_text_size", lambda s: acl.memcpy(acl.malloc(64), "64", acl.malloc(64), 64, 3),
          INVALID + "acl.memcpy: dest_max must be an int, got '64'"),
    _case("free_host_a_list", lambda s: acl.free_host([1, 2]), INVALID + "acl.free_host: arr must be a numpy array, "
                                                                         "got [1, 2]"),
    _case("callback_not_callable", lambda s: acl.launch_callback(3, None, acl.CALLBACK_BLOCK, s),
          INVALID + "acl.launch_callback: fn must be a callable, got 3"),
    _case("set_device_huge_text", lambda s: acl.set_device("0" * 50),
          INVALID + "acl.set_device: device_id must be an int, got '000000000000000000000000000000000000..."),
    _case("destroy_context_none", lambda s: acl.destroy_context(None),
          INVALID + "acl.destroy_context: ctx must be a Context, got None"),
    _case("synchronize_destroyed_stream", _destroyed_stream, HANDLE + " (107017): stream 2 was destroyed"),
    _case("record_destroyed_event", _destroyed_event, HANDLE + " (107017): event 0 was destroyed"),
]
