"""Measured op durations (an msprof op_summary, a GPU kernel trace) as a frozen value that
compile options can carry: the ``measured_durations`` pass times each matching task at its
measured duration instead of the cost model's (``passes/measured.py``)."""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True, slots=True)
class MeasuredOp:
    """One measured op: its name and type, its input shapes as msprof writes them
    (``1,3,224,224;64,3,7,7``; empty when unknown) and its device time in us."""

    name: str
    op: str
    shapes: str
    us: float


@dataclass(frozen=True)
class MeasuredTimes:
    """A run's measured ops (one entry per op, repeated runs averaged) and where from."""

    ops: tuple[MeasuredOp, ...]
    source: str

    def scaled(self, name: str, factor: float) -> MeasuredTimes:
        """The same measurements with op ``name`` taking ``factor`` times as long (a what-if)."""
        if not any(o.name == name for o in self.ops):
            raise KeyError(name)
        return MeasuredTimes(tuple(replace(o, us=o.us * factor) if o.name == name else o for o in self.ops),
                             f"{self.source} ({name} x{factor:g})")
