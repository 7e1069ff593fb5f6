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

import threading
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Sequence

_state = threading.local()


@contextmanager
def lend(pool: Any) -> Iterator[None]:
    """Let kernels run on this thread split their work over ``pool`` meanwhile."""
    before = getattr(_state, "pool", None)
    _state.pool = pool
    try:
        yield
    finally:
        _state.pool = before


def run_all(fn: Callable[[Any], None], pieces: Sequence[Any]) -> None:
    """``fn(piece)`` for every piece, on the lent pool when there is one."""
    pool = getattr(_state, "pool", None)
    if pool is None or len(pieces) < 2:
        for p in pieces:
            fn(p)
        return
    futures = [pool.submit(fn, p) for p in pieces[1:]]
    try:
        fn(pieces[0])
    except BaseException:
        for f in futures:   # let every piece finish before the output is given up
            f.exception()
        raise
    for f in futures:
        f.result()
