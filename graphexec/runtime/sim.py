"""The device simulation: a deterministic discrete-event model of the hardware scheduler.

The host enqueues tasks with a timestamp (its own clock). The device side is advanced
lazily, only as far as the host blocks (synchronize, a full command queue), which is
exact: nothing the host does later can change what the device did before that time.

Each stream runs its tasks in FIFO order, one at a time. A kernel's blocks go onto
free cores of its unit, highest-priority stream first, never preempted; a kernel with
more blocks than free cores runs in waves. A block's duration is a roofline: its flops
over one core's peak or its bytes over the HBM bandwidth shared by the blocks running
at that moment, whichever is longer. Kernels read their inputs when they start and
write their outputs when they end, so the numbers follow simulated time.
"""

from __future__ import annotations

import heapq
import itertools
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable

AICPU_CORES = 4                 # assumption: AI CPU cores available to kernels
AICPU_FLOPS_PER_US = 2_000.0    # assumption: ~2 GFLOP/s scalar code per AI CPU core


@dataclass(eq=False, slots=True)
class DeviceTask:
    """One entry of a stream's command queue.

    ``start_fn`` runs when the task starts (a kernel reads and computes then) and its
    return value goes to ``end_fn`` when the task ends (the kernel's writes).
    """

    kind: str                       # "kernel", "memcpy", "record", "wait", "callback"
    stream: Any
    name: str = ""
    unit: str = "vector"            # "cube", "vector", "aicpu", "copy" or "" for control tasks
    block_dim: int = 1
    flops: float = 0.0
    bytes: float = 0.0
    dtype: str = "float16"
    copy_kind: str = "d2d"
    event: Any = None
    start_fn: Callable[[], Any] | None = None
    end_fn: Callable[[Any], None] | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    seq: int = 0
    enqueue_t: float = 0.0
    start_t: float | None = None
    end_t: float | None = None
    blocks_left: int = 0
    blocks_running: int = 0
    ready_t: float = 0.0
    result: Any = None
    max_cores: int = 0

    @property
    def done(self) -> bool:
        return self.end_t is not None


class Simulator:
    """Discrete-event core shared by every stream of one device."""

    def __init__(self, profile: Any) -> None:
        self.profile = profile
        self.now = 0.0
        self._heap: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = itertools.count()
        self.streams: list[Any] = []
        self.free = self._core_pools(profile)
        self.running_blocks = 0
        self._active: list[DeviceTask] = []
        self.finished: list[DeviceTask] = []
        self.samples: list[tuple[float, int, int]] = []  # time, busy cube, busy vector

    @staticmethod
    def _core_pools(profile: Any) -> dict[str, int]:
        if profile.coupled:
            return {"aicore": profile.ai_cores, "aicpu": AICPU_CORES}
        return {"cube": profile.ai_cores, "vector": profile.vector_cores, "aicpu": AICPU_CORES}

    def pool_of(self, unit: str) -> str:
        return "aicore" if self.profile.coupled and unit in ("cube", "vector") else unit

    # ---- host side -------------------------------------------------------------
    def submit(self, task: DeviceTask, at: float) -> None:
        """Put ``task`` at the tail of its stream's queue at host time ``at``."""
        task.seq = next(self._seq)
        task.enqueue_t = at
        task.stream.queue.append(task)
        self._at(at, self._dispatch)

    def _at(self, t: float, fn: Callable[[], None]) -> None:
        heapq.heappush(self._heap, (t, next(self._seq), fn))

    def run_until(self, cond: Callable[[], bool]) -> float:
        """Advance simulated time until ``cond()`` holds; return the time it held."""
        while not cond():
            if not self._heap:
                raise RuntimeError("simulation stalled: the condition can never hold")
            t, _, fn = heapq.heappop(self._heap)
            self.now = max(self.now, t)
            fn()
        return self.now

    def idle(self) -> bool:
        """True when no stream has queued or running work."""
        return all(not s.queue and s.active is None for s in self.streams)

    # ---- device side -----------------------------------------------------------
    def _dispatch(self) -> None:
        """Start every task that can start now, then hand free cores to blocks."""
        progress = True
        while progress:
            progress = False
            for s in sorted(self.streams, key=lambda s: (s.priority, s.id)):
                while s.active is None and s.queue and s.queue[0].enqueue_t <= self.now:
                    if not self._start(s.queue[0]):
                        break
                    s.queue.popleft()
                    progress = True
        self._fill_cores()

    def _start(self, task: DeviceTask) -> bool:
        """Begin ``task`` if it can begin; control tasks complete on the spot."""
        s = task.stream
        if task.kind == "wait":
            if not task.event.is_complete_at(self.now):
                return False
            task.start_t = task.end_t = self.now
            self.finished.append(task)
            return True
        task.start_t = self.now
        if task.start_fn is not None:
            task.result = task.start_fn()
        if task.kind == "record":
            task.end_t = self.now
            task.event.complete(self.now)
            self.finished.append(task)
            self._at(self.now, self._dispatch)  # waiters on other streams may go now
            return True
        s.active = task
        if task.kind in ("kernel",):
            task.blocks_left = max(1, task.block_dim)
            task.ready_t = self.now + self.profile.task_overhead_us
            self._active.append(task)
            self._at(task.ready_t, self._fill_cores)
        else:  # memcpy and callbacks run on their own engines
            self._at(self.now + self._copy_time(task), lambda: self._finish(task))
        return True

    def _copy_time(self, task: DeviceTask) -> float:
        if task.kind != "memcpy" or task.bytes <= 0:
            return self.profile.task_overhead_us if task.kind == "memcpy" else 0.0
        return self.profile.task_overhead_us + task.bytes / self.profile.copy_bytes_per_us(task.copy_kind)

    def _fill_cores(self) -> None:
        order = sorted(self._active, key=lambda t: (t.stream.priority, t.seq))
        for task in order:
            pool = self.pool_of(task.unit)
            while task.blocks_left > 0 and self.free[pool] > 0 and task.ready_t <= self.now:
                self.free[pool] -= 1
                task.blocks_left -= 1
                task.blocks_running += 1
                self.running_blocks += 1
                task.max_cores = max(task.max_cores, task.blocks_running)
                self._at(self.now + self._block_time(task), lambda t=task, p=pool: self._block_done(t, p))
        self._sample()

    def _block_time(self, task: DeviceTask) -> float:
        n = max(1, task.block_dim)
        flops, nbytes = task.flops / n, task.bytes / n
        p = self.profile
        if task.unit == "cube":
            compute = flops / p.cube_flops_per_us_per_core(task.dtype)
        elif task.unit == "vector":
            compute = flops / p.vector_flops_per_us_per_core(task.dtype)
        else:
            compute = flops / AICPU_FLOPS_PER_US
        memory = nbytes / (p.hbm_bytes_per_us / max(1, self.running_blocks))
        return max(compute, memory, 1e-3)

    def _block_done(self, task: DeviceTask, pool: str) -> None:
        self.free[pool] += 1
        task.blocks_running -= 1
        self.running_blocks -= 1
        if task.blocks_left == 0 and task.blocks_running == 0:
            self._active.remove(task)
            self._finish(task)
        else:
            self._fill_cores()

    def _finish(self, task: DeviceTask) -> None:
        task.end_t = self.now
        if task.end_fn is not None:
            task.end_fn(task.result)
        task.result = None
        task.stream.active = None
        task.stream.last_end = self.now
        self.finished.append(task)
        self._dispatch()

    def _sample(self) -> None:
        if self.profile.coupled:
            busy = self.profile.ai_cores - self.free["aicore"]
            sample = (self.now, busy, busy)
        else:
            sample = (self.now, self.profile.ai_cores - self.free["cube"],
                      self.profile.vector_cores - self.free["vector"])
        if self.samples and self.samples[-1][0] == self.now:
            self.samples[-1] = sample
        else:
            self.samples.append(sample)


def new_queue() -> deque[DeviceTask]:
    return deque()
