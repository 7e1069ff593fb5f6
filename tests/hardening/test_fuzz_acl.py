"""Fuzzing the ACL-style runtime: sequences of calls with hostile arguments (sizes past the
device, garbage pointers, wrong types) raise an AclError or succeed, nothing else, no hang."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import graphexec as gx
from graphexec import acl
from graphexec.acl.state import STATE
from hardening import bad_inputs as B
from hardening.guard import deadline

SMALL = B.small_device()
ACL_INTS = st.integers(-2, 4096) | st.sampled_from([0, 2**26, 2**26 + 1, 2**40, 2**63, -(2**63), 2**70])
ACL_ARGS = ACL_INTS | st.none() | st.floats() | st.text(max_size=3) | st.booleans()


def _acl_call(draw: st.DrawFn, acl: Any, ptrs: list) -> None:
    """One ACL call with hostile arguments, on pointers this case allocated (or garbage)."""
    ptr = draw(st.sampled_from(ptrs) | ACL_ARGS) if ptrs else draw(ACL_ARGS)
    off = draw(st.integers(-8, 128) | st.just(0))
    at = ptr + off if isinstance(ptr, int) and not isinstance(ptr, bool) else ptr
    host = np.zeros(draw(st.integers(0, 256)), "uint8")
    kind = draw(st.sampled_from(["malloc", "malloc", "free", "memcpy", "memset", "view", "malloc_host",
                                 "malloc_cached", "stream", "event"]))
    if kind == "malloc":
        ptrs.append(acl.malloc(draw(ACL_ARGS)))
    elif kind == "free":
        acl.free(at)
    elif kind == "memcpy":
        acl.memcpy(at, draw(ACL_ARGS), host, draw(ACL_ARGS), draw(st.integers(-1, 5) | ACL_ARGS))
    elif kind == "memset":
        acl.memset(at, draw(ACL_ARGS), draw(ACL_ARGS), draw(ACL_ARGS))
    elif kind == "view":
        acl.view(at, draw(st.sampled_from(["float32", "int8", "bogus", None])), draw(st.lists(ACL_INTS, max_size=3)))
    elif kind == "malloc_host":
        acl.malloc_host(draw(ACL_ARGS))
    elif kind == "malloc_cached":
        ptrs.append(acl.malloc_cached(draw(ACL_ARGS)))
    elif kind == "stream":
        acl.synchronize_stream(acl.create_stream(draw(ACL_ARGS)))
    else:
        ev = acl.create_event()
        acl.record_event(ev, None)
        acl.synchronize_event(ev)


def test_fuzz_acl_runtime(budget):
    @budget(300)
    @given(st.data())
    def case(data: st.DataObject) -> None:
        if STATE.initialized:
            acl.finalize()
        acl.init(profile=SMALL, check_hazards=True)
        acl.set_device(0)
        ptrs: list = []
        try:
            with deadline(30, "a sequence of ACL calls"):
                for _ in range(data.draw(st.integers(1, 8))):
                    try:
                        _acl_call(data.draw, acl, ptrs)
                    except gx.GraphExecError as e:
                        assert str(e) and "\n" not in str(e)
                acl.synchronize_device()
        finally:
            acl.finalize()
    case()


@pytest.mark.parametrize("call,message", [
    (lambda acl: acl.create_stream("high"), "ACL_ERROR_INVALID_PARAM (100000): acl.create_stream: priority must be "
                                            "an int, got 'high'"),
    (lambda acl: acl.view(acl.malloc(64), "bogus", [4]), "ACL_ERROR_INVALID_PARAM (100000): view dtype 'bogus' is "
                                                         "not a numpy dtype"),
    (lambda acl: acl.view(acl.malloc(64), "float32", [-1]), "ACL_ERROR_INVALID_PARAM (100000): view shape must be a "
                                                            "list of ints >= 0, got [-1]"),
    (lambda acl: acl.malloc_host(2**70), "ACL_ERROR_RT_MEMORY_ALLOCATION (207001): cannot allocate "
                                         "1180591620717411303424 bytes of pinned host memory"),
], ids=["priority_text", "view_dtype", "view_negative_dim", "malloc_host_huge"])
def test_acl_regressions(call, message):
    """What the ACL fuzzer found: each a ValueError, TypeError or MemoryError before the fix."""
    if STATE.initialized:
        acl.finalize()
    acl.init(profile=SMALL)
    acl.set_device(0)
    try:
        with pytest.raises(gx.AclError) as e:
            call(acl)
        assert str(e.value) == message
    finally:
        acl.finalize()
