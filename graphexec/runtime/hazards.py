"""The hazard checker: a race detector for streams.

Two accesses race when they touch overlapping bytes, at least one writes, they come
from different streams (or the host), and neither happens before the other. Order is
tracked with vector clocks, one component per stream plus one for the host: a task
ticks its stream's component, a record snapshots the stream's clock, a wait merges the
snapshot it is bound to, and a host synchronize merges what it waited for into the
host's clock, which every later launch inherits. So any chain of events through any
number of streams orders two tasks, exactly as on hardware, and the check needs no
timing at all: it runs at enqueue, and reports the tasks' simulated intervals later.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from graphexec.errors import AclError

HOST = "host"
_KIND = {(True, False): "RAW", (False, True): "WAR", (True, True): "WAW"}
_PRUNE_AT = 64


@dataclass(eq=False, slots=True)
class HostOp:
    """A blocking host-side access (a synchronous memcpy or memset), as a pseudo task."""

    name: str
    start_t: float
    end_t: float
    kind: str = "host"
    stream: Any = None


@dataclass(frozen=True, slots=True)
class Hazard:
    """An unsynchronized pair: ``first`` was enqueued before ``second``."""

    kind: str          # "RAW", "WAR" or "WAW"
    first: Any         # a DeviceTask or HostOp
    second: Any
    tensor: str
    lo: int            # overlapping byte range [lo, hi), device addresses
    hi: int

    @property
    def streams(self) -> tuple[Any, Any]:
        return _where(self.first), _where(self.second)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "tensor": self.tensor, "bytes": [self.lo, self.hi],
                "first": self.first.name, "second": self.second.name,
                "first_stream": _where(self.first), "second_stream": _where(self.second),
                "first_interval": [self.first.start_t, self.first.end_t],
                "second_interval": [self.second.start_t, self.second.end_t]}

    def __str__(self) -> str:
        a, b = self.first, self.second
        return (f"{self.kind} on {self.tensor!r} bytes [{self.lo:#x}, {self.hi:#x}): {a.name!r} "
                f"(stream {_where(a)}) and {b.name!r} (stream {_where(b)}) are not ordered by any event")


def _where(task: Any) -> Any:
    return HOST if task.stream is None else task.stream.id


class _Access:
    __slots__ = ("task", "key", "clock", "lo", "hi", "write", "name")

    def __init__(self, task: Any, key: Any, clock: int, lo: int, hi: int, write: bool, name: str) -> None:
        self.task, self.key, self.clock = task, key, clock
        self.lo, self.hi, self.write, self.name = lo, hi, write, name


def _merge(into: dict, other: dict) -> None:
    for k, v in other.items():
        if into.get(k, 0) < v:
            into[k] = v


class HazardChecker:
    """Vector clocks per stream, byte-range accesses per allocation, races found."""

    def __init__(self, memory: Any) -> None:
        self.memory = memory
        self.hazards: list[Hazard] = []
        self._vc: dict[Any, dict] = {}
        self._merged: dict[Any, int] = {}
        self._host: dict[Any, int] = {}
        self._version = 0
        self._record_vc: dict[int, dict] = {}       # id(record task) -> its snapshot
        self._by_seg: dict[int, dict[Any, list[_Access]]] = {}   # base -> stream -> accesses
        self._seen: set[tuple] = set()

    # ---- clocks ----------------------------------------------------------------
    def _clock_of(self, stream: Any) -> dict:
        vc = self._vc.get(stream)
        if vc is None:
            vc = self._vc[stream] = dict(self._host)
        elif self._merged.get(stream) != self._version:
            _merge(vc, self._host)
        self._merged[stream] = self._version
        return vc

    def _host_merge(self, vc: dict) -> None:
        _merge(self._host, vc)
        self._version += 1

    def on_launch(self, task: Any) -> None:
        """Order ``task`` after what its stream has seen, then check its accesses."""
        s = task.stream
        vc = self._clock_of(s)
        if task.kind == "wait":
            _merge(vc, self._record_vc.get(id(task.event.record_task), {}))
            return
        clock = vc[s] = vc.get(s, 0) + 1
        if task.kind in ("record", "control"):
            self._record_vc[id(task)] = dict(vc)
        self._check(task, s, clock, vc)

    def activate(self, control: Any, stream: Any) -> None:
        """A control task's switch starts ``stream``: what it launches there comes after
        everything its own stream had launched before it (like a wait on a record)."""
        _merge(self._clock_of(stream), self._record_vc.get(id(control), {}))

    def on_host_access(self, op: HostOp, reads: list, writes: list) -> None:
        """A blocking host copy: ordered after every host synchronize before it."""
        clock = self._host[HOST] = self._host.get(HOST, 0) + 1
        self._version += 1
        self._check_ranges(op, HOST, clock, self._host, reads, writes)

    def sync_stream(self, stream: Any) -> None:
        self._host_merge(self._clock_of(stream))

    def sync_device(self, streams: list) -> None:
        for s in streams:
            _merge(self._host, self._clock_of(s))
        self._version += 1

    def sync_record(self, record_task: Any) -> None:
        self._host_merge(self._record_vc.get(id(record_task), {}))

    def forget(self, base: int) -> None:
        """An allocation was freed: its accesses can race with nothing any more."""
        self._by_seg.pop(base, None)

    # ---- accesses --------------------------------------------------------------
    def _check(self, task: Any, key: Any, clock: int, vc: dict) -> None:
        if task.reads or task.writes:
            self._check_ranges(task, key, clock, vc, task.reads, task.writes)

    def _check_ranges(self, task: Any, key: Any, clock: int, vc: dict, reads: Any, writes: Any) -> None:
        for write, ranges in ((False, reads), (True, writes)):
            for ptr, nbytes, name in ranges:
                if nbytes > 0:
                    self._access(_Access(task, key, clock, ptr, ptr + nbytes, write, name), vc)

    def _access(self, acc: _Access, vc: dict) -> None:
        """Compare with the accesses of other streams that ``vc`` has not seen, then keep it.

        Per allocation and stream, accesses are kept in clock order, so walking one
        backwards stops at the first access the new one is ordered after: only the
        unordered tail is ever visited, however long the history.
        """
        try:
            seg, _ = self.memory.segment(acc.lo)
        except AclError:
            return   # not device memory: the launch itself reports that
        lists = self._by_seg.setdefault(seg.base, {})
        for key, past in lists.items():
            if key is acc.key:
                continue
            seen = vc.get(key, 0)
            for a in reversed(past):
                if a.clock <= seen:
                    break
                if a.lo < acc.hi and acc.lo < a.hi and (a.write or acc.write):
                    self._report(a, acc)
        own = lists.setdefault(acc.key, [])
        own.append(acc)
        if len(own) >= _PRUNE_AT and len(own) & (len(own) - 1) == 0:   # at powers of two
            self._prune(acc.key, own)

    def _report(self, a: _Access, b: _Access) -> None:
        kind = _KIND[(a.write, b.write)]
        tensor = a.name if a.name == b.name else f"{a.name}/{b.name}"
        key = (id(a.task), id(b.task), kind, tensor)
        if key not in self._seen:
            self._seen.add(key)
            self.hazards.append(Hazard(kind, a.task, b.task, tensor, max(a.lo, b.lo), min(a.hi, b.hi)))

    def _prune(self, key: Any, own: list[_Access]) -> None:
        """Drop the accesses every stream (and the host) is already ordered after."""
        clocks = [vc for s, vc in self._vc.items() if not getattr(s, "destroyed", False)] + [self._host]
        floor = min(vc.get(key, 0) for vc in clocks)
        del own[:sum(1 for a in own if a.clock <= floor)]
