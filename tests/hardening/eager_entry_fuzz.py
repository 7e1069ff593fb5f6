"""Every public eager entry (``graphexec.npu``'s functions and the methods of its Tensor,
Stream and Event) called by hypothesis with arguments of every kind: wrong types, None,
huge and negative ints, NaN, handles of the wrong kind, and handles whose device was reset
(issue 39, class 5). Run in a process of its own, ``python eager_entry_fuzz.py N``, since a
crash must fail the test, not end pytest. A call must succeed or raise a GraphExecError (or
Python's own TypeError for a wrong count of arguments); the script prints ``ok`` and exits 0,
or prints the falsifying example and exits 1.
"""

from __future__ import annotations

import inspect
import sys
from typing import Any

import numpy as np
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import graphexec.npu as npu
from graphexec.errors import GraphExecError

ENTRIES = sorted(n for n in npu.__all__ if n[0].islower() and callable(getattr(npu, n))
                 and n not in ("profiler", "ops", "init", "graph"))
METHODS = {cls: sorted(m for m in dir(cls) if not m.startswith("_") and callable(getattr(cls, m)))
           for cls in (npu.Tensor, npu.Stream, npu.Event)}
PLAIN = (st.none() | st.booleans() | st.integers(-3, 64)
         | st.sampled_from([2**31, 2**63, -(2**63), 2**70, -1, 10**30])
         | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=3)
         | st.sampled_from([[], [1, 2], (2, 3), {}, object(), np.zeros(3, np.float32), np.zeros(2, object),
                            "npu", "cpu", "npu:9", "float32", "bogus", np.float32, object, int, lambda *a: None]))


def world() -> list[Any]:
    """Live and stale handles: device and host tensors, a stream, events, and a tensor, a
    stream and an event made before the device was reset."""
    stale = [npu.ones(3, device="npu"), npu.Stream(), npu.Event()]
    stale[2].record()
    npu.reset_device()
    live = [npu.ones((2, 3), device="npu"), npu.zeros(3), npu.Stream(), npu.Event(),
            npu.tensor([1, 2], device="npu")]
    return live + stale


def _count(fn: Any) -> int:
    try:
        return len(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return 3


@settings(max_examples=int(sys.argv[1]) if len(sys.argv) > 1 else 100, derandomize=True, database=None,
          deadline=None, suppress_health_check=list(HealthCheck),
          phases=[Phase.explicit, Phase.generate])   # the first failure as found: shrinking resets a device per step
@given(st.data())
def case(data: st.DataObject) -> None:
    handles = world()
    for _ in range(data.draw(st.integers(1, 4))):
        if data.draw(st.booleans()):
            fn = getattr(npu, data.draw(st.sampled_from(ENTRIES)))
        else:
            owner = data.draw(st.sampled_from(handles))
            names = METHODS.get(type(owner), [])
            if not names:
                continue
            fn = getattr(owner, data.draw(st.sampled_from(names)))
        args = [data.draw(st.sampled_from(handles)) if data.draw(st.booleans()) else data.draw(PLAIN)
                for _ in range(data.draw(st.integers(0, min(_count(fn), 4))))]
        try:
            out = fn(*args)
            if isinstance(out, npu.Tensor):
                repr(out.cpu().numpy())
            npu.synchronize()
        except GraphExecError as e:
            assert str(e) and "\n" not in str(e), (fn, args, e)
        except TypeError as e:   # Python's own, for a wrong count of arguments
            assert "positional argument" in str(e) or "required" in str(e), (fn, args, e)


if __name__ == "__main__":
    case()
    print("ok")
