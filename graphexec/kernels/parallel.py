"""Independent pieces of one kernel's math on the session's worker threads.

A kernel that already works in pieces of a fixed size (chunks of output rows, say) gets
the same bits whether the pieces run one after another or side by side, as long as the
cut does not depend on the number of threads: each piece is the same BLAS call or numpy
loop on the same bytes, writing its own part of the output. So during a run with
``threads`` the run's own thread lends its pool here; pieces go to the pool while this
thread takes its share. On worker threads (a kernel computing eagerly) and without a
pool, pieces run in order, so nothing ever waits on a queue it is part of.
"""

from __future__ import annotations

import itertools
import threading
from typing import Any, Callable, Sequence

_state = threading.local()


class lend:   # noqa: N801   (used as the function it was: ``with lend(pool, workers):``)
    """Let kernels run on this thread split their work over ``pool`` (``workers`` threads)
    meanwhile. A class, not a ``@contextmanager`` generator: a replayed run enters it once,
    and the generator's frames cost a few us of a decode step's run."""

    __slots__ = ("pool", "workers", "before")

    def __init__(self, pool: Any, workers: int = 1) -> None:
        self.pool, self.workers = pool, workers

    def __enter__(self) -> None:
        self.before = getattr(_state, "pool", None), getattr(_state, "workers", 0)
        _state.pool, _state.workers = self.pool, self.workers

    def __exit__(self, *exc: object) -> None:
        _state.pool, _state.workers = self.before


MIN_FLOPS = 3e7   # below this much math a hand-over to a worker costs more than it saves


def run_all(fn: Callable[[Any], object], pieces: Sequence[Any], flops: float = float("inf")) -> None:
    """``fn(piece)`` for every piece, on the lent pool when there is one and ``flops`` (the
    whole job's) make it worth it: this thread and the workers each take the next piece
    not yet taken until none is left."""
    pool = getattr(_state, "pool", None)
    if pool is None or len(pieces) < 2 or flops < MIN_FLOPS:
        for p in pieces:
            fn(p)
        return
    taken = itertools.count()   # next() on a count is atomic under the GIL

    def drain() -> None:
        for i in iter(lambda: next(taken), None):
            if i >= len(pieces):
                return
            fn(pieces[i])

    helpers = [pool.submit(drain) for _ in range(min(len(pieces) - 1, _state.workers))]
    try:
        drain()
    except BaseException:
        for f in helpers:   # let every piece finish before the output is given up
            f.exception()
        raise
    for f in helpers:
        f.result()
