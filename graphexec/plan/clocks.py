"""Vector clocks of a schedule, one row per wait.

A task's clock says, per stream, how many of that stream's tasks surely finished before
the task starts (stream order plus events). Along a stream it changes only in the
stream's own entry, except at a wait, which merges in the clock of the record waited
on. So each stream keeps the merged clock at its waits only ("checkpoints"); a task's
entry for another stream is that of the last checkpoint at or before it. Memory and
time are O(tasks + waits x streams) instead of O(tasks x streams), which grew
quadratically once long streams are split (GE's limit of ~670 tasks per stream) into
more streams as the graph grows. A checkpoint is a numpy row over the streams: a merge
is one ``np.maximum`` whatever the width, where a dict of the known streams cost a
Python step per stream (the rows widen with the graph as its streams are split).
"""

from __future__ import annotations

import bisect

import numpy as np


class Clocks:
    """Clocks of the tasks appended so far; ``get(task, s)`` is clock[task][s] in O(log waits)."""

    def __init__(self, n_streams: int) -> None:
        self.n = n_streams
        self.stream: dict[int, int] = {}
        self.pos: dict[int, int] = {}                 # task id -> index in its stream
        self._len = [0] * n_streams                   # tasks appended per stream
        self._at: list[list[int]] = [[] for _ in range(n_streams)]     # checkpoint positions
        self._cp: list[list[np.ndarray]] = [[] for _ in range(n_streams)]
        self._zero = np.zeros(n_streams, dtype=np.int64)
        self._zero.flags.writeable = False
        self._cur: list[np.ndarray] = [self._zero] * n_streams   # merged so far, per stream
        self._table: dict[int, np.ndarray] = {}      # stream -> its checkpoints stacked (column())

    def add(self, task: int, stream: int) -> None:
        """Append ``task`` at the end of ``stream``: its clock is the stream's current one."""
        self.stream[task] = stream
        self.pos[task] = self._len[stream]
        self._len[stream] += 1

    def current(self, stream: int, s: int) -> int:
        """What the next task appended to ``stream`` will know of stream ``s``."""
        return self._len[stream] if s == stream else int(self._cur[stream][s])

    def merge_after(self, stream: int, task: int) -> None:
        """What ``stream`` knows from now on includes everything up to the end of ``task``."""
        cur = self._cur[stream]
        src, p = self.stream[task], self.pos[task]
        cp, own = self._checkpoint(src, p), int(cur[src])
        if p + 1 <= own:   # the record itself is known: is anything else new?
            grown = cp > cur
            grown[src] = False
            if not grown.any():   # nothing new: the stream's current clock (and checkpoint) stand
                return
        merged = np.maximum(cur, cp)
        merged[src] = max(own, p + 1)   # the record's own stream: up to the record
        self._cur[stream] = merged
        self._table.pop(stream, None)
        at = self._len[stream]
        if self._at[stream] and self._at[stream][-1] == at:   # several waits before one task
            self._cp[stream][-1] = merged
        else:
            self._at[stream].append(at)
            self._cp[stream].append(merged)

    def _checkpoint(self, s: int, p: int) -> np.ndarray:
        k = bisect.bisect_right(self._at[s], p) - 1
        return self._cp[s][k] if k >= 0 else self._zero

    def get(self, task: int, s: int) -> int:
        """clock[task][s]: how many tasks of stream ``s`` surely finished before ``task`` starts."""
        own = self.stream[task]
        if s == own:
            return self.pos[task]
        return int(self._checkpoint(own, self.pos[task])[s])

    def knows(self, task: int, need: list[tuple[int, int]]) -> bool:
        """Whether ``task`` starts after the ``pos``-th task of each (stream, pos) in ``need``."""
        own, p = self.stream[task], self.pos[task]
        cp = self._checkpoint(own, p)
        return all((p if s == own else int(cp[s])) > e for s, e in need)

    def column(self, stream: int, s: int) -> tuple[list[int], list[int]]:
        """Along ``stream``: the positions where its checkpoints start and what each knows of
        stream ``s`` (both non-decreasing: a stream's clock only grows)."""
        at, table = self.table(stream)
        return at, table[:, s].tolist()

    def table(self, stream: int) -> tuple[list[int], np.ndarray]:
        """Along ``stream``: the positions where its checkpoints start and the checkpoints
        stacked (one row over the streams each; every column non-decreasing)."""
        table = self._table.get(stream)
        if table is None:
            rows = self._cp[stream]
            table = self._table[stream] = np.stack(rows) if rows else np.zeros((0, self.n), dtype=np.int64)
        return self._at[stream], table

    def entry(self, s: int) -> np.ndarray:
        """The clock of stream ``s``'s first task (a read-only row over the streams; its own
        entry is not meaningful): what the whole stream knows."""
        return self._checkpoint(s, 0)

    def __getitem__(self, task: int) -> tuple[int, ...]:
        """The dense clock of ``task`` (O(streams): for tests and small schedules)."""
        return tuple(self.get(task, s) for s in range(self.n))

    def __contains__(self, task: int) -> bool:
        return task in self.pos
