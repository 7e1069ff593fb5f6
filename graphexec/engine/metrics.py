"""Measurements of one executed run, from the device's finished tasks."""

from __future__ import annotations

from typing import Any, TypedDict

INF = float("inf")


class Utilization(TypedDict):
    """What :func:`utilization` returns (Stats fields of the same names)."""

    cube_utilization: float
    vector_utilization: float
    hbm_utilization: float


def utilization(done: list[Any], profile: Any, makespan: float) -> Utilization:
    """Achieved share of peak: cube and vector flops, HBM bytes, over the makespan."""
    return _shares(_Sums(profile), done, profile, makespan)


class _Sums:
    """The kernels' busy time per unit at peak (flops / the unit's peak at their dtype,
    summed in task order) and the bytes they moved."""

    __slots__ = ("peak", "cores", "work", "moved")

    def __init__(self, profile: Any) -> None:
        self.peak: dict[str, dict[str, float]] = {"cube": {}, "vector": {}}   # a unit's flops/us per dtype
        self.cores = {"cube": profile.ai_cores, "vector": profile.vector_cores}
        self.work = {"cube": 0.0, "vector": 0.0}
        self.moved = 0.0

    def add(self, t: Any, profile: Any) -> None:
        self.moved += t.bytes
        rates = self.peak.get(t.unit)
        if rates is not None:
            rate = rates.get(t.dtype)
            if rate is None:
                rate = rates[t.dtype] = profile.unit_rate(t.unit, t.dtype) * self.cores[t.unit]
            self.work[t.unit] += t.flops / rate


def _shares(sums: _Sums, done: list[Any] | None, profile: Any, makespan: float) -> Utilization:
    """The utilizations over ``makespan`` (``done``'s kernels added to ``sums`` first)."""
    if makespan <= 0:
        return {"cube_utilization": 0.0, "vector_utilization": 0.0, "hbm_utilization": 0.0}
    for t in done or ():
        if t.kind == "kernel":
            sums.add(t, profile)
    work = sums.work
    return {"cube_utilization": work["cube"] / makespan, "vector_utilization": work["vector"] / makespan,
            "hbm_utilization": sums.moved / (profile.hbm_bytes_per_us * makespan)}


class Scan(TypedDict):
    """What :func:`scan` returns: the work's window and the kernel counts and sums."""

    lo: float
    hi: float
    num_kernels: int
    num_aicpu: int
    utilization: Utilization


def scan(done: list[Any], profile: Any) -> Scan:
    """One pass over a run's started tasks for ``make_stats``: the window of the kernels,
    copies and control tasks (first start, last end), the kernels on the AI cores and on
    the AI CPU, and :func:`utilization` over that window (the same sums in the same order)."""
    sums = _Sums(profile)
    peak, work = sums.peak, sums.work
    lo, hi = INF, -INF
    kernels = aicpu = 0
    moved = 0.0
    for t in done:
        kind = t.kind
        if kind == "kernel":
            kernels += 1
            unit = t.unit
            if unit == "aicpu":
                aicpu += 1
            moved += t.bytes   # ``sums.add(t, profile)``, inline: a call per kernel cost as much as the rest
            rates = peak.get(unit)
            if rates is not None:
                rate = rates.get(t.dtype)
                if rate is None:
                    rate = rates[t.dtype] = profile.unit_rate(unit, t.dtype) * sums.cores[unit]
                work[unit] += t.flops / rate
        elif kind != "memcpy" and kind != "control":
            continue
        if t.start_t < lo:
            lo = t.start_t
        if t.end_t > hi:
            hi = t.end_t
    sums.moved = moved
    util = _shares(sums, None, profile, hi - lo if hi >= lo else 0.0)
    return {"lo": lo, "hi": hi, "num_kernels": kernels - aicpu, "num_aicpu": aicpu, "utilization": util}


def executed_live_peak(done: list[Any], sizes: dict[str, int], root: Any) -> int:
    """Most activation bytes live at once as executed: a tensor lives from the start of
    its writer to the end of its last reader.

    ``root`` maps a value to the one owning its bytes. For a ``TaskGraph.root`` whose
    aliases point straight at their roots (``TaskGraph.flat``) every name that lives in an
    activation tensor is mapped to it up front (``_owners``), so a name costs one lookup.
    """
    owner = _owners(root, sizes)
    get = owner.get if owner is not None else (lambda n: r if (r := root(n)) in sizes else None)
    first: dict[str, float] = {}
    last: dict[str, float] = {}
    for t in done:
        if t.kind != "kernel":
            continue
        task = t.meta.get("task")
        if task is None:
            continue
        start, end = t.start_t, t.end_t
        for name in task.writes:
            name = get(name)
            if name is None:
                continue
            if name not in first:
                first[name], last[name] = start, end
                continue
            if start < first[name]:
                first[name] = start
            if end > last[name]:
                last[name] = end
        for name in task.reads:
            name = get(name)
            if name is not None and name in last and end > last[name]:
                last[name] = end
    return _peak(first, last, sizes)


def _owners(root: Any, sizes: dict[str, int]) -> dict[str, str] | None:
    """Each name whose bytes are an activation tensor's -> that tensor, when ``root`` is a
    flat ``TaskGraph.root``; None otherwise (``root`` is called per name)."""
    graph = getattr(root, "__self__", None)
    if graph is None or not getattr(graph, "flat", False):
        return None
    alias = graph.alias
    owner = dict(zip(sizes, sizes))
    for a in alias.keys() & owner.keys():   # an alias is never its own root (none, in a plan)
        del owner[a]
    owner.update({a: r for a, r in alias.items() if r in sizes})
    return owner


def _peak(first: dict[str, float], last: dict[str, float], sizes: dict[str, int]) -> int:
    """The most bytes live at once; within equal times ends (0) before starts (1), and the
    order inside a group cannot change the peak (all adds or all subtractions)."""
    return peak_of([(s, 1, sizes[n]) for n, s in first.items()] + [(e, 0, -sizes[n]) for n, e in last.items()])


def peak_of(points: list[tuple[float, int, int]]) -> int:
    """The highest running sum of the deltas of (time, 0 end / 1 start, delta) points, in
    (time, kind) order (``run_stats`` gives its own points)."""
    live = peak = 0
    for _, _, delta in sorted(points):
        live += delta
        if live > peak:
            peak = live
    return peak
