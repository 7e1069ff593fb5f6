"""Every public ACL entry point called with every kind of bad argument: wrong types, None,
huge and negative ints, NaN, handles of the wrong kind (an event where a stream goes), handles
already destroyed (a stream, an event, a context, a freed pointer) and calls after finalize.
A call succeeds or raises AclError with its ACL code and a one-line message: never a raw
TypeError/AttributeError/ValueError, never a hang, never a crash (issue 39, class 5).
"""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import graphexec as gx
from graphexec import acl
from graphexec.acl.state import STATE
from hardening import bad_inputs as B
from hardening.guard import deadline
from hardening.round_three_acl import ACL

SMALL = B.small_device()
ROOT = Path(__file__).resolve().parents[2]
ENTRIES = sorted(name for name in acl.__all__ if name[0].islower() and callable(getattr(acl, name)))


class World:
    """Live and destroyed handles of every kind, made on a fresh runtime."""

    def __init__(self) -> None:
        if STATE.initialized:
            acl.finalize()
        acl.init(profile=SMALL, check_hazards=True)
        acl.set_device(0)
        self.ctx = acl.create_context(0)
        self.stream, self.event, self.ptr = acl.create_stream(), acl.create_event(), acl.malloc(256)
        self.host = acl.malloc_host(64)
        gone_stream, gone_event, gone_ptr = acl.create_stream(), acl.create_event(), acl.malloc(64)
        acl.destroy_stream(gone_stream)
        acl.destroy_event(gone_event)
        acl.free(gone_ptr)
        gone_ctx = acl.create_context(0)
        acl.destroy_context(gone_ctx)
        acl.set_current_context(self.ctx)
        self.tensor = acl.tensor(self.ptr, "float32", [8])
        self.handles: list[Any] = [self.ctx, self.stream, self.event, self.ptr, self.host, self.tensor,
                                   gone_stream, gone_event, gone_ptr, gone_ctx, self.ptr + 255, self.ptr + 256]


def _kernel(*args: Any) -> None:
    raise ValueError("a kernel that fails")


PLAIN = (st.none() | st.booleans() | st.integers(-2, 300)
         | st.sampled_from([2**31, 2**63, -(2**63), 2**64, 2**200, -1, 10**30])
         | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=4) | st.binary(max_size=4)
         | st.sampled_from([[], [1, 2], {}, {"a": 1}, (), object(), np.zeros(3, np.float32), np.zeros(2, object),
                            np.float64("nan"), np.int64(-5), "float32", "bogus", _kernel, lambda *a: None,
                            int, acl.MEMCPY_HOST_TO_DEVICE, acl.MEMCPY_DEVICE_TO_HOST, acl.CALLBACK_BLOCK]))


def _arg(draw: st.DrawFn, world: World) -> Any:
    return draw(st.sampled_from(world.handles)) if draw(st.booleans()) else draw(PLAIN)


def _call(draw: st.DrawFn, world: World) -> tuple[str, Callable[[], Any]]:
    name = draw(st.sampled_from(ENTRIES))
    fn = getattr(acl, name)
    try:
        params = len(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        params = 4
    args = [_arg(draw, world) for _ in range(draw(st.integers(0, min(params, 6))))]
    return f"acl.{name}{tuple(args)!r}", lambda: fn(*args)


def test_fuzz_every_acl_entry(budget):
    @budget(300)
    @given(st.data())
    def case(data: st.DataObject) -> None:
        world = World()
        try:
            with deadline(30, "a sequence of ACL calls"):
                for _ in range(data.draw(st.integers(1, 6))):
                    what, call = _call(data.draw, world)
                    try:
                        call()
                    except gx.AclError as e:
                        assert e.code and str(e) and "\n" not in str(e), what
                    except gx.GraphExecError as e:   # a profile or system file argument: its own family
                        assert type(e).__name__ in {"ProfileError", "SystemError_"}, (what, e)
                    except TypeError as e:   # only a wrong *number* of arguments, which is Python's to say
                        assert "positional argument" in str(e) or "required" in str(e), (what, e)
        finally:
            if STATE.initialized:
                acl.finalize()
    case()


@pytest.mark.parametrize("name", ENTRIES)
def test_each_entry_with_no_runtime(name):
    """Called before acl.init(), every entry is one AclError (or works without a runtime)."""
    if STATE.initialized:
        acl.finalize()
    fn = getattr(acl, name)
    params = [p for p in inspect.signature(fn).parameters.values()
              if p.default is inspect.Parameter.empty and p.kind is p.POSITIONAL_OR_KEYWORD]
    try:
        fn(*[0] * len(params))
    except gx.AclError as e:
        assert e.code and "\n" not in str(e)
    finally:
        if STATE.initialized:
            acl.finalize()


@pytest.mark.parametrize("case", ACL, ids=[c.name for c in ACL])
def test_issue_39_case_acl_raises_its_line(case):
    with pytest.raises(case.error) as err:
        case.call()
    assert str(err.value) == case.message


@pytest.mark.slow
def test_fuzz_every_eager_entry(request):
    """eager_entry_fuzz.py, in a process of its own: hypothesis over every public npu entry."""
    n = 1000 if request.config.getoption("--long") else 100
    p = subprocess.run([sys.executable, str(Path(__file__).with_name("eager_entry_fuzz.py")), str(n)],
                       capture_output=True, text=True, timeout=900, cwd=ROOT,
                       env={**os.environ, "OPENBLAS_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)})
    assert (p.returncode, p.stdout.strip()) == (0, "ok"), p.stdout[-3000:] + p.stderr[-3000:]
