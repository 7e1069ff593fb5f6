"""The host memory budget: the one number every size read from a file or a declaration is
checked against before the bytes are spent.

``GRAPHEXEC_HOST_BUDGET`` (bytes) sets it; by default it is half of this machine's physical
memory, so a hostile header or declaration is refused with one line instead of ending in
MemoryError (or the kernel's OOM killer) halfway through a load.
"""

from __future__ import annotations

import os

from graphexec.errors import GraphExecError

ENV = "GRAPHEXEC_HOST_BUDGET"


def host_budget() -> tuple[int, str]:
    """(bytes, where the number comes from), read each time so the variable can change."""
    text = os.environ.get(ENV, "").strip()
    if text:
        try:
            value = int(text)
        except ValueError:
            raise GraphExecError(f"{ENV}={text!r}: must be a number of bytes") from None
        if value < 1:
            raise GraphExecError(f"{ENV}={text!r}: must be at least 1 byte")
        return value, ENV
    return _physical() // 2, f"half of this host's memory; {ENV} sets it"


def _physical() -> int:
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):  # no sysconf: assume a small laptop
        return 8 << 30


def over_budget(nbytes: int, hbm: tuple[str, int] | None = None) -> str | None:
    """Why ``nbytes`` cannot be held (the host budget, or ``hbm``: (device name, bytes)), or None."""
    if hbm is not None and nbytes > hbm[1]:
        return f"needs {nbytes} bytes; device {hbm[0]} has {hbm[1]} bytes"
    budget, source = host_budget()
    if nbytes > budget:
        return f"needs {nbytes} bytes, more than the host budget of {budget} bytes ({source})"
    return None
