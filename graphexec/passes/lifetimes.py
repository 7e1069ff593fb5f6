"""Lifetimes of tensors in a schedule's partial order (stream order plus events)."""

from __future__ import annotations

from dataclasses import dataclass

from graphexec.passes.events import Schedule
from graphexec.passes.tasks import TaskGraph


@dataclass(frozen=True, slots=True)
class Lifetime:
    """When a tensor is in use: its writer and, per stream, the last position touching it."""

    name: str
    size: int
    first: int                    # launch index of the writer
    last: int                     # launch index of the last reader
    stream: int
    writers: tuple[int, ...]      # ids of the tasks writing it (several for a no-task Concat)
    end: tuple[int, ...]          # per stream, the last position of a task touching it (-1: none)


def lifetimes(tasks: TaskGraph, schedule: Schedule, sizes: dict[str, int]) -> dict[str, Lifetime]:
    """Lifetime of every buffer (root value) in ``sizes`` that a task writes."""
    n = len(schedule.streams)
    info: dict[str, list] = {}
    for i, t in enumerate(schedule.order):
        for name in t.writes:
            root = tasks.root(name)
            if root in sizes:
                rec = info.setdefault(root, [i, i, t.stream, [], [-1] * n])
                rec[3].append(t.id)
        for name in list(t.reads) + list(t.writes):
            rec = info.get(tasks.root(name))
            if rec is not None:
                rec[1] = max(rec[1], i)
                rec[4][t.stream] = max(rec[4][t.stream], schedule.pos[t.id])
    return {k: Lifetime(k, sizes[k], v[0], v[1], v[2], tuple(v[3]), tuple(v[4])) for k, v in info.items()}


def ordered(a: Lifetime, b: Lifetime, schedule: Schedule) -> bool:
    """True when every use of ``a`` happens before ``b`` is written, so they may share bytes."""
    return all(all(e < 0 or schedule.clock[w][s] > e for s, e in enumerate(a.end)) for w in b.writers)
