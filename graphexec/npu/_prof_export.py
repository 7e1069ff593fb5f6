"""What the torch-style profiler saves of one cycle, ready for ``profiling/ascend_pt.py``:
every run of its steps with the step, stats and diagnosis, and its allocator blocks.

A device window's run (an eager card's or an ACL device's) gets its stats measured on its
tasks (``eager_stats``) and a diagnosis by replay, without actions (no plan to compile
again). A Session run brings its own stats; its diagnosis (with actions) is made once per
plan, on the plan's last run of the cycle, as a PROF folder does. With Session runs in a
step the steps are laid out one after another (``ascend_steps.lay_out``); without, each
window keeps its device's clock.

``blocks`` gives operator_memory.csv its rows: each block an eager op took, from the
allocator's samples at the moment it was taken and given back (``Recorder.blocks``).
"""

from __future__ import annotations

from typing import Any

from graphexec.npu._prof_memory import _op_of
from graphexec.npu._prof_stats import eager_stats
from graphexec.npu._prof_steps import Taken
from graphexec.profiling.ascend_steps import lay_out
from graphexec.profiling.diagnosis import diagnose


def saved_runs(taken: Taken) -> tuple[list[Any], list[dict[str, Any]]]:
    """(runs, extras) of the cycle: device windows first, then Session runs, in step order."""
    runs: list[Any] = []
    extras: list[dict[str, Any]] = []
    run: Any
    for run, w in taken.runs:
        stats = eager_stats(run)
        d = diagnose(run, stats).to_dict()
        d.pop("actions")
        end = max([w.end, *(t.end_t for t in run.tasks)])
        mine = [[m[1], m[2], m[3]] for m in taken.memory if w.kind == "eager" and m[0] == w.card
                and w.start <= m[1] <= end]
        runs.append(run)
        extras.append({"step": w.step, "window": [w.start, end], "stats": stats.to_dict(), "diagnosis": d,
                       **({"memory_samples": mine} if mine else {})})
    sessions = _sessions(taken.results)
    for run, extra in sessions:
        runs.append(run)
        extras.append(extra)
    if sessions:
        lay_out(runs, extras)
    return runs, extras


def _sessions(results: list[tuple[Any, int]]) -> list[tuple[Any, dict[str, Any]]]:
    """Every card of every Session result, with its stats; a plan's diagnosis on its last run."""
    last = {id(r.run.plan): k for k, (r, _) in enumerate(results)}
    out = []
    for k, (result, step) in enumerate(results):
        records = list(getattr(result, "records", None) or [])
        many = len(records) > 1
        stats = result.card_stats if many else [result.stats]
        diagnosed = last[id(result.run.plan)] == k
        diagnoses = (result.card_diagnoses if many else [result.diagnosis]) if diagnosed else [None] * len(stats)
        for record, s, d in zip(records if many else [result.run], stats, diagnoses):
            extra: dict[str, Any] = {"step": step, "stats": s.to_dict(), "session": True, "result": k}
            if d is not None:
                extra["diagnosis"] = d.to_dict()
            out.append((record, extra))
    return out


def blocks(taken: Taken) -> list[tuple[Any, ...]]:
    """Each block taken in the cycle: (card, op name, bytes, taken at, given back at or None,
    (allocated, reserved, active) when taken, the same when given back or None, stream)."""
    launches = {w.card: (w.device.launches, w.first) for _, w in taken.runs if w.kind == "eager"}
    held: dict[tuple[int, int], int] = {}
    out: list[list[Any]] = []
    for (card, t, alloc, reserved, active, stream), (_, ptr, size, n) in zip(taken.memory, taken.blocks):
        if size >= 0:
            lcs, first = launches.get(card, ([], 0))
            held[(card, ptr)] = len(out)
            out.append([card, _op_of(lcs, n, first)[0], size, t, None, (alloc, reserved, active), None, stream])
        elif (card, ptr) in held:
            b = out[held.pop((card, ptr))]
            b[4], b[6] = t, (alloc, reserved, active)
    return [tuple(b) for b in out]
