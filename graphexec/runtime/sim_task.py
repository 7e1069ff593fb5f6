"""The task a stream's command queue holds (``sim.py`` runs them; importable from there too)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

__all__ = ["DeviceTask"]


@dataclass(eq=False, slots=True)
class DeviceTask:
    """One entry of a stream's command queue.

    ``start_fn`` runs when the task starts (a kernel reads and computes then) and its
    return value goes to ``end_fn`` when the task ends (the kernel's writes).
    ``reads``/``writes`` are ``(ptr, nbytes, name)`` ranges for the hazard checker.
    """

    kind: str                       # "kernel", "memcpy", "record", "wait", "reset", "callback", "control"
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
    reads: tuple | list = ()
    writes: tuple | list = ()
    seq: int = 0
    enqueue_t: float = 0.0
    start_t: float | None = None
    end_t: float | None = None
    blocks_left: int = 0
    blocks_running: int = 0
    block_us: float = 0.0
    block_bytes: float = 0.0
    ready_t: float = 0.0
    result: Any = None
    max_cores: int = 0
    driver: Any = None              # decides when the task ends (a peer copy's link, a collective)
    pool: str = ""                  # the core pool its blocks run on (set when it starts)

    @property
    def done(self) -> bool:
        return self.end_t is not None
