"""A tape's replay as straight-line code, generated once per plan and tape.

``Steps.replay`` walks the tape in a loop. Each step costs an index test, list lookups and
a call; each end also costs an identity test. On a decode step's ~340 steps of kernels of
a microsecond or two, that loop is a sixth of the run. The tape and the steps stay fixed
from run to run, so the loop is unrolled once, like a CUDA graph's launch list made
straight:

- each start is a call of its start;
- each end is a call of its end, where the result is not already the output's view;
- the order and the tests are the loop's.

The generated code does none of the loop's rarer work. When a start raises, or an end's
store moves the views (a run-time allocation), it returns that step's position, and the
loop (``Steps.replay``, the plain reference) goes on from there.

A program is made only for a tape replayed a few times with its steps unchanged. A plan
run once (a decode loop's new signature every step) never pays for its compile.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Callable

import numpy as np

CHUNK = 400          # tape steps per generated function: each compiles in a few ms, the total stays linear
AFTER_REPLAYS = 2    # replays of one tape and version by the loop before its program is made

Program = list[Callable[[Any, Any, list[Any]], "tuple[int, Exception | None]"]]


def quiet_end(end: Any) -> bool:
    """Whether ``end`` copies into an array it holds and can never allocate: a view
    bind's ``partial(into.__setitem__, Ellipsis)`` (``Steps._direct``)."""
    if type(end) is not partial or end.args != (Ellipsis,) or end.keywords:
        return False
    func = end.func
    return getattr(func, "__name__", "") == "__setitem__" and type(getattr(func, "__self__", None)) is np.ndarray


def generate(tape_steps: list[int], starts: list[Callable[[], Any]], ends: list[Callable[[Any], None]],
             outs: list[Any], never: Any) -> Program:
    """The functions that run ``tape_steps`` in turn. Each is called as ``fn(ctx, views,
    results)`` and returns ``(-1, None)`` when it has run its stretch. Otherwise it returns
    ``(k, exc)``: the start at position ``k`` raised ``exc``; or ``(k, None)``: the end at
    ``k`` moved ``ctx.views`` away from ``views``. ``ends[i]`` must be a callable (a
    direct step's ``_store`` bound to ``i``). ``never`` is the ``outs`` entry no result is."""
    env: dict[str, Any] = {}
    for i, start in enumerate(starts):
        env[f"S{i}"], env[f"E{i}"], env[f"O{i}"] = start, ends[i], outs[i]
    fns: Program = []
    k, n = 0, len(tape_steps)
    while k < n:
        stop = min(n, k + CHUNK)
        if stop < n and tape_steps[stop - 1] >= 0 and tape_steps[stop] == ~tape_steps[stop - 1]:
            stop += 1   # a start and its adjacent end stay in one function
        fns.append(_compile(_body(tape_steps, k, stop, ends, outs, never), env, len(fns)))
        k = stop
    return fns


def _body(tape_steps: list[int], a: int, b: int, ends: list[Callable[[Any], None]], outs: list[Any],
          never: Any) -> list[str]:
    """The lines of one function: positions ``a`` to ``b`` of the tape. Kernel ``i``'s start,
    end and output are the function's globals ``S{i}``, ``E{i}``, ``O{i}``."""
    lines = []
    k = a
    while k < b:
        s = tape_steps[k]
        if s >= 0:
            paired = k + 1 < b and tape_steps[k + 1] == ~s
            dst = "r" if paired else f"R[{s}]"
            lines += ["try:", f"    {dst} = S{s}()", "except Exception as e:", f"    return {k}, e"]
            if paired:
                lines += _end(s, k + 1, ends, outs, never, pending=False)
                k += 1
        else:
            lines += _end(~s, k, ends, outs, never, pending=True)
        k += 1
    return lines


def _end(i: int, k: int, ends: list[Callable[[Any], None]], outs: list[Any], never: Any,
         pending: bool) -> list[str]:
    """Kernel ``i``'s end at position ``k``: its result (in ``r``, or pending in ``R[i]``) stored
    unless it is its output already, then, for an end that may allocate, the views' check."""
    lines = [f"r = R[{i}]", f"R[{i}] = None"] if pending else []
    check = [] if quiet_end(ends[i]) else [f"if ctx.views is not V: return {k}, None"]
    if outs[i] is never:
        return lines + [f"E{i}(r)"] + check
    return lines + [f"if r is not O{i}:", f"    E{i}(r)"] + [f"    {c}" for c in check]


def _compile(lines: list[str], env: dict[str, Any], index: int) -> Callable[..., Any]:
    """One function from ``lines`` (its body) with ``env`` as its globals."""
    src = "\n".join([f"def replay_{index}(ctx, V, R):"] + [f"    {line}" for line in lines]
                    + ["    return -1, None"])
    code = compile(src, f"<replay {index}>", "exec")
    exec(code, env)   # noqa: S102  (our own text: calls by index into the plan's steps)
    return env[f"replay_{index}"]  # type: ignore[no-any-return]
