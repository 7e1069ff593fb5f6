"""A wall-clock guard for code that must not hang: raises Hang after ``seconds``."""

from __future__ import annotations

import signal
from contextlib import contextmanager
from typing import Iterator


class Hang(BaseException):
    """Raised into the code under test when it overruns; a BaseException, so that the
    code's own ``except Exception`` handlers cannot swallow it."""


@contextmanager
def deadline(seconds: float, what: str = "") -> Iterator[None]:
    """Run the body under a SIGALRM timer (main thread, POSIX) of ``seconds``."""
    def fire(signum: int, frame: object) -> None:
        raise Hang(f"{what or 'the call'} ran past {seconds} s")

    previous = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
