"""Vector clocks of a schedule, stored sparsely.

A task's clock says, per stream, how many of that stream's tasks surely finished before
the task starts (stream order plus events). Along a stream it changes only in the
stream's own entry, except at a wait, which merges in the clock of the record waited
on. So each stream keeps the merged clock at its waits only ("checkpoints"); a task's
entry for another stream is that of the last checkpoint at or before it. Memory and
time are O(tasks + waits x streams) instead of O(tasks x streams), which grew
quadratically once long streams are split (GE's limit of ~670 tasks per stream) into
more streams as the graph grows.
"""

from __future__ import annotations

import bisect


class Clocks:
    """Clocks of the tasks appended so far; ``get(task, s)`` is clock[task][s] in O(log waits)."""

    def __init__(self, n_streams: int) -> None:
        self.n = n_streams
        self.stream: dict[int, int] = {}
        self.pos: dict[int, int] = {}                 # task id -> index in its stream
        self._len = [0] * n_streams                   # tasks appended per stream
        self._at: list[list[int]] = [[] for _ in range(n_streams)]     # checkpoint positions
        self._cp: list[list[dict[int, int]]] = [[] for _ in range(n_streams)]
        self._cur: list[dict[int, int]] = [{} for _ in range(n_streams)]   # merged so far, per stream

    def add(self, task: int, stream: int) -> None:
        """Append ``task`` at the end of ``stream``: its clock is the stream's current one."""
        self.stream[task] = stream
        self.pos[task] = self._len[stream]
        self._len[stream] += 1

    def current(self, stream: int, s: int) -> int:
        """What the next task appended to ``stream`` will know of stream ``s``."""
        return self._len[stream] if s == stream else self._cur[stream].get(s, 0)

    def merge_after(self, stream: int, task: int) -> None:
        """What ``stream`` knows from now on includes everything up to the end of ``task``."""
        cur = self._cur[stream]
        src, p = self.stream[task], self.pos[task]
        grown = [(s, v) for s, v in self._checkpoint(src, p).items() if s != src and v > cur.get(s, 0)]
        if p + 1 > cur.get(src, 0):
            grown.append((src, p + 1))
        if not grown:   # nothing new: the stream's current clock (and checkpoint) stand
            return
        merged = dict(cur)
        merged.update(grown)
        self._cur[stream] = merged
        at = self._len[stream]
        if self._at[stream] and self._at[stream][-1] == at:   # several waits before one task
            self._cp[stream][-1] = merged
        else:
            self._at[stream].append(at)
            self._cp[stream].append(merged)

    def _checkpoint(self, s: int, p: int) -> dict[int, int]:
        k = bisect.bisect_right(self._at[s], p) - 1
        return self._cp[s][k] if k >= 0 else {}

    def get(self, task: int, s: int) -> int:
        """clock[task][s]: how many tasks of stream ``s`` surely finished before ``task`` starts."""
        own = self.stream[task]
        if s == own:
            return self.pos[task]
        return self._checkpoint(own, self.pos[task]).get(s, 0)

    def knows(self, task: int, need: list[tuple[int, int]]) -> bool:
        """Whether ``task`` starts after the ``pos``-th task of each (stream, pos) in ``need``."""
        own, p = self.stream[task], self.pos[task]
        cp = self._checkpoint(own, p)
        return all((p if s == own else cp.get(s, 0)) > e for s, e in need)

    def column(self, stream: int, s: int) -> tuple[list[int], list[int]]:
        """Along ``stream``: the positions where its checkpoints start and what each knows of
        stream ``s`` (both non-decreasing: a stream's clock only grows)."""
        return self._at[stream], [cp.get(s, 0) for cp in self._cp[stream]]

    def entry(self, s: int) -> dict[int, int]:
        """The clock of stream ``s``'s first task (others only): what the whole stream knows."""
        return self._checkpoint(s, 0)

    def __getitem__(self, task: int) -> tuple[int, ...]:
        """The dense clock of ``task`` (O(streams): for tests and small schedules)."""
        return tuple(self.get(task, s) for s in range(self.n))

    def __contains__(self, task: int) -> bool:
        return task in self.pos
