"""The eager API fuzzed in a process of its own (issue 39, class 5): ``python eager_fuzz.py
SEED N``. N calls of the public entry points with random dtypes, shapes and argument
types; every tensor made is read back (what made a wrong dtype fatal). A call may raise
(a GraphExecError is the documented answer); the process must end by itself, exit 0,
and print the count of each exception type it saw, one ``name count`` per line."""

from __future__ import annotations

import collections
import random
import sys

import numpy as np

import graphexec.npu as npu

rng = random.Random(int(sys.argv[1]))
DTYPES = [np.float32, np.float16, np.int64, np.int8, np.uint8, bool, np.complex64, object, "U3", "V4", "S2",
          "datetime64[s]", "timedelta64", None, "nonsense", 3, np.dtype([("a", "f4")])]
SHAPES = [(), (0,), (3,), (2, 3), (1, 1, 4), (-1,), (2**40,), 1.5, "a", None, (True,), [2, 2]]
VALUES = [0, -1, 1.5, float("nan"), float("inf"), True, 1j, object(), "x", None, [1, "a"], [1.0, 2.0], b"\x00",
          np.arange(3, dtype=np.float32), np.array([None, 1], dtype=object), np.array(["ab"]), (1, 2),
          {"a": 1}, np.float64(2.5), np.int8(-3), slice(1), Ellipsis]
DEVICES = [None, "npu", "npu:0", "cpu", "npu:7", 0, -1, "gpu", 1.5]


def pick(pool: list) -> object:
    return rng.choice(pool)


def made() -> object:
    """A tensor (host or device) from a random factory, or whatever a factory raises on."""
    which = rng.randrange(7)
    if which == 0:
        return npu.tensor(pick(VALUES), dtype=pick(DTYPES), device=pick(DEVICES))
    if which == 1:
        return npu.from_numpy(pick(VALUES)).npu()
    if which == 2:
        return npu.empty(pick(SHAPES), dtype=pick(DTYPES), device=pick(DEVICES))
    if which == 3:
        return npu.full(pick(SHAPES), pick(VALUES), dtype=pick(DTYPES), device=pick(DEVICES))
    if which == 4:
        return npu.zeros(pick(SHAPES), dtype=pick(DTYPES), device=pick(DEVICES))
    if which == 5:
        return npu.randn(pick(SHAPES), dtype=pick(DTYPES), device=pick(DEVICES))
    return npu.ones(3, device="npu").to(dtype=pick(DTYPES))


def used(t: object) -> object:
    """An op, a move, a stream or event call on ``t`` with a random other argument."""
    other = pick(VALUES + [t, npu.ones(3, device="npu"), npu.Stream(), npu.Event(), "s"])
    which = rng.randrange(10)
    if which == 0:
        return t + other
    if which == 1:
        return t * other
    if which == 2:
        return t @ other
    if which == 3:
        return t.to(pick(DEVICES), dtype=pick(DTYPES))
    if which == 4:
        npu.current_stream().wait_event(other)
        return None
    if which == 5:
        npu.Event().record(other)
        return None
    if which == 6:
        t.copy_(other)
        return t
    if which == 7:
        return t.reshape(pick(SHAPES))
    if which == 8:
        return t[pick(VALUES)]
    return t.type(pick(DTYPES))


def read(t: object) -> None:
    if isinstance(t, npu.Tensor):
        repr(t.cpu().numpy())


seen: collections.Counter = collections.Counter()
for _ in range(int(sys.argv[2])):
    try:
        t = made()
        read(t)
        read(used(t))
        npu.synchronize()
    except Exception as e:   # noqa: BLE001  (counted: the process must live to say so)
        seen[type(e).__name__] += 1
for name, n in sorted(seen.items()):
    print(name, n)
