"""Lifetimes of tensors in a schedule's partial order (stream order plus events)."""

from __future__ import annotations

from dataclasses import dataclass

from graphexec.plan.schedule import Schedule
from graphexec.plan.tasks import TaskGraph


@dataclass(frozen=True, slots=True)
class Lifetime:
    """When a tensor is in use: its writer and, per stream, the last position touching it."""

    name: str
    size: int
    first: int                    # launch index of the writer
    last: int                     # launch index of the last reader
    stream: int
    writers: tuple[int, ...]      # ids of the tasks writing it (several for a no-task Concat)
    end: tuple[tuple[int, int], ...]   # (stream, last position of a task touching it) per stream that does


def lifetimes(tasks: TaskGraph, schedule: Schedule, sizes: dict[str, int]) -> dict[str, Lifetime]:
    """Lifetime of every buffer (root value) in ``sizes`` that a task writes."""
    info: dict[str, list] = {}
    root, stream_of = tasks.root, schedule.stream_of
    for i, t in enumerate(schedule.order):
        for name in t.writes:
            r = root(name)
            if r in sizes:
                rec = info.setdefault(r, [i, i, stream_of[t.id], [], {}])
                rec[3].append(t.id)
        pos = schedule.pos[t.id]
        for name in (*t.reads, *t.writes):
            used = info.get(root(name))
            if used is not None:
                used[1] = i
                s = stream_of[t.id]
                if used[4].get(s, -1) < pos:
                    used[4][s] = pos
    return {k: Lifetime(k, sizes[k], v[0], v[1], v[2], tuple(v[3]), tuple(sorted(v[4].items())))
            for k, v in info.items()}


def ordered(a: Lifetime, b: Lifetime, schedule: Schedule) -> bool:
    """True when every use of ``a`` happens before ``b`` is written, so they may share bytes."""
    return all(schedule.clock.knows(w, list(a.end)) for w in b.writers)
