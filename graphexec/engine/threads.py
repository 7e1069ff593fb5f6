"""Kernel math on a thread pool (``Session(threads=N)``), results bit-identical.

numpy releases the GIL in its loops and in BLAS, so kernels can compute side by side.
What must not change is what each kernel reads and what memory holds when: a kernel's
inputs are final once the tasks writing them have stored their outputs, and they keep
their bytes until the kernel ends (the memory plan orders any reuse after the last
reader). So a kernel may compute on a worker at any moment between its producers' ends
and its own end, which is when its outputs are stored, in simulated order as always:

- when its producers are done and it is not the next kernel to start, it is handed to a
  worker at once ("eager"), into a pooled scratch array (its output bytes may still be in
  use by the tensor that had them before);
- one not handed over earlier goes to a worker at its start if other kernels start or
  end before it ends (the tape tells), writing into its output bytes; alone, it computes
  in the run's own thread, as without threads;
- the end waits for the worker, then stores.

A kernel whose inputs are not surely final (a schedule missing an event) computes at
its start in the run's own thread, exactly as without threads. Each kernel computes the
same numbers from the same bytes whoever runs it, so outputs, stats and trace are
identical to a one-thread run.
"""

from __future__ import annotations

import heapq
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np

from graphexec.passes.thread_plan import ThreadPlan
from graphexec.plan.tasks import Task


class Workers:
    """``n`` threads for kernel math: the run's own thread plus a pool of ``n - 1``, shared
    by the compiled plans of a session, and the scratch outputs of eager kernels."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.pool = ThreadPoolExecutor(max_workers=max(1, n - 1), thread_name_prefix="graphexec")
        self._free: dict[tuple, list[np.ndarray]] = {}   # reused by the run's thread only

    def take(self, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        """A scratch array (fresh big arrays cost a page fault per 4 KiB)."""
        free = self._free.get((shape, dtype))
        return free.pop() if free else np.empty(shape, dtype)

    def give(self, a: np.ndarray) -> None:
        self._free.setdefault((a.shape, a.dtype), []).append(a)

    def shutdown(self) -> None:
        self.pool.shutdown(wait=True)


LOOKAHEAD = 16        # eager kernels start at most this many kernel starts ahead


class Overlap:
    """One run's bookkeeping: pending work, what is ready, how much is in flight."""

    def __init__(self, workers: Workers, ctx: Any, plan: ThreadPlan, kernels: list[Task], tape: Any) -> None:
        # the run's thread computes too: hand work over only to an idle worker
        self.workers, self.limit, self.ctx, self.plan = workers, max(1, workers.n - 1), ctx, plan
        self.kernels, self.alone = kernels, tape.alone
        self.order = [i for i in tape.steps if i >= 0]    # kernels in the order they start
        self.rank = {k: r for r, k in enumerate(self.order)}
        self.waiting = dict(plan.needs)
        self.begun = [False] * len(kernels)
        self.front = 0                     # position in ``order`` of the next kernel to start
        self.running: list[Future] = []   # handed to workers and not done yet
        self.scratch: dict[int, np.ndarray] = {}
        self.ready = [self._key(t) for t, n in self.waiting.items() if n == 0]
        heapq.heapify(self.ready)
        self._pump()

    def _key(self, tid: int) -> tuple[int, int]:
        return self.rank[self.plan.index[tid]], tid

    def begin(self, call: Any) -> Any:
        """At the task's start: its eager future, a worker's, or its outputs computed here."""
        self.begun[call.index] = True
        while self.front < len(self.order) and self.begun[self.order[self.front]]:
            self.front += 1
        self._pump()
        if call.pending is not None:
            return call.pending
        if call.task.id in self.plan.needs and call.index not in self.alone and self._idle():
            call.pending = self.workers.pool.submit(call.compute)
            self.running.append(call.pending)
            return call.pending
        return call.compute()

    def _idle(self) -> bool:
        """Whether a worker is free (the run's thread computes the rest itself)."""
        self.running = [f for f in self.running if not f.done()]
        return len(self.running) < self.limit

    def finish(self, call: Any, result: Any) -> Any:
        """At the task's end: wait for the worker if there is one."""
        if isinstance(result, Future):
            result = result.result()
            call.pending = None
        return result

    def stored(self, task: Task) -> None:
        """``task`` stored its outputs: readers whose inputs are now final may start."""
        buf = self.scratch.pop(task.id, None)
        if buf is not None:
            self.workers.give(buf)
        for c in self.plan.consumers.get(task.id, ()):
            self.waiting[c] -= 1
            if self.waiting[c] == 0:
                heapq.heappush(self.ready, self._key(c))
        self._pump()

    def _pump(self) -> None:
        """Hand ready kernels to idle workers, earliest to start first, looking at most
        LOOKAHEAD starts ahead (a constant filled at the very end would hold a worker and
        its scratch for the whole run). The next kernel to start is left to its start,
        where it writes in place."""
        front = []
        nxt = self.order[self.front] if self.front < len(self.order) else -1
        while self.ready and self.ready[0][0] <= self.front + LOOKAHEAD and self._idle():
            pos, tid = heapq.heappop(self.ready)
            i = self.plan.index[tid]
            if self.begun[i]:
                continue
            if i == nxt:
                front.append((pos, tid))
                continue
            self._submit(self.ctx.call(self.kernels[i]))
        for item in front:
            heapq.heappush(self.ready, item)

    def drain(self) -> None:
        """Wait for every worker still computing (a run that stops early must not leave one
        writing into device memory)."""
        for call in list(self.ctx.calls.values()):
            if call.pending is not None:
                call.pending.exception()
                call.pending = None

    def _submit(self, call: Any) -> Future:
        buf = None
        t = call.task
        if call.out is not None:   # a planned output: a pooled scratch of its shape
            v = self.ctx.read(call.out)
            buf = self.scratch[t.id] = self.workers.take(v.shape, v.dtype)
        call.pending = self.workers.pool.submit(call.compute, False, buf)
        self.running.append(call.pending)
        return call.pending
