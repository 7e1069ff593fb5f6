"""Lifetimes of tensors in a schedule's partial order (stream order plus events): plan
records, read off a TaskGraph and a Schedule, that memory planning places buffers by and
the contracts check a memory plan against."""

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
    root, stream_of, where = tasks.root, schedule.stream_of, schedule.pos
    alias, flat = tasks.alias, tasks.flat   # flat: a lookup, not a call, per name
    for i, t in enumerate(schedule.order):
        if not t.writes and not t.reads:   # an event
            continue
        s = stream_of[t.id]
        for name in t.writes:
            r = alias.get(name, name) if flat else root(name)
            if r in sizes:
                rec = info.get(r)
                if rec is None:
                    rec = info[r] = [i, i, s, [], {}]
                rec[3].append(t.id)
        pos = where[t.id]
        for name in (*t.reads, *t.writes):
            used = info.get(alias.get(name, name) if flat else root(name))
            if used is not None:
                used[1] = i
                if used[4].get(s, -1) < pos:
                    used[4][s] = pos
    return {k: Lifetime(k, sizes[k], v[0], v[1], v[2], tuple(v[3]), tuple(sorted(v[4].items())))
            for k, v in info.items()}


def ordered(a: Lifetime, b: Lifetime, schedule: Schedule) -> bool:
    """True when every use of ``a`` happens before ``b`` is written, so they may share bytes."""
    return all(schedule.clock.knows(w, list(a.end)) for w in b.writers)
