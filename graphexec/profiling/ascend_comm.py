"""communication.json and communication_matrix.json of ASCEND_PROFILER_OUTPUT, from the
collectives the steps ran (the format and the rules are in ``ascend_extra.py``'s docstring;
the totals are torch_npu's CommunicationParser's: times and sizes summed, the ratios and
bandwidths computed again from the sums)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Sequence

MS = 1e3   # us per ms
MB = 1e6   # bytes per MB in Transit Size: MB / ms is GB/s


def _ratio(a: float, b: float) -> float:
    return round(a / b, 4) if abs(b) > 1e-15 else 0.0


def _part(t: Any, run: Any, begin: float) -> tuple[dict[str, Any], dict[str, dict[str, Any]], str] | None:
    """One rank's part of a collective: its time info, its matrix entries, p2p or collective."""
    op = getattr(getattr(t, "driver", None), "op", None)
    if op is None or t.end_t is None:
        return None
    starts = [p.task.start_t for p in op.parts.values() if p.task.start_t is not None] or [t.start_t]
    last = max(starts)
    wait, transit = max(0.0, last - t.start_t), max(0.0, t.end_t - last)
    time = {"Start Timestamp(us)": t.start_t + begin, "Elapse Time(ms)": (t.end_t - t.start_t) / MS,
            "Transit Time(ms)": transit / MS, "Wait Time(ms)": wait / MS, "Synchronization Time(ms)": wait / MS,
            "Idle Time(ms)": max(0.0, t.end_t - t.start_t - wait - transit) / MS,
            "Wait Time Ratio": _ratio(wait, wait + transit), "Synchronization Time Ratio": _ratio(wait, wait + transit)}
    me = op.devices.index(run.device_id) if run.device_id in op.devices else -1
    links: dict[str, dict[str, Any]] = {}
    for step in op.plan.steps:
        for a, b, nbytes in step.flows:
            if a != me:
                continue
            kind = op.server.system.link(op.devices[a], op.devices[b]).kind
            e = links.setdefault(f"{a}-{b}", {"Transport Type": kind, "Transit Size(MB)": 0.0,
                                              "Transit Time(ms)": transit / MS})
            e["Transit Size(MB)"] += nbytes / MB
    for e in links.values():
        e["Bandwidth(GB/s)"] = _ratio(e["Transit Size(MB)"], e["Transit Time(ms)"])
    return time, links, "p2p" if op.plan.algorithm == "p2p" else "collective"


def _bandwidth(links: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per link kind: the rank's bytes, the transfer's time, GB/s, sizes sent."""
    out: dict[str, dict[str, Any]] = {}
    for e in links.values():
        b = out.setdefault(e["Transport Type"], {"Transit Size(MB)": 0.0, "Transit Time(ms)": e["Transit Time(ms)"],
                                                 "Large Packet Ratio": 0.0, "Size Distribution": {}})
        b["Transit Size(MB)"] += e["Transit Size(MB)"]
        size = b["Size Distribution"].setdefault(f"{e['Transit Size(MB)']:g}", [0, 0.0])
        size[0] += 1
        size[1] += e["Transit Time(ms)"]
    for b in out.values():
        b["Bandwidth(GB/s)"] = _ratio(b["Transit Size(MB)"], b["Transit Time(ms)"])
    return out


def _totals(ops: dict[str, Any]) -> dict[str, Any]:
    time: dict[str, float] = defaultdict(float)
    bw: dict[str, dict[str, Any]] = {}
    for info in ops.values():
        for k, v in info["Communication Time Info"].items():
            if k not in ("Wait Time Ratio", "Synchronization Time Ratio", "Start Timestamp(us)"):
                time[k] += v
        for kind, b in info["Communication Bandwidth Info"].items():
            t = bw.setdefault(kind, {"Transit Size(MB)": 0.0, "Transit Time(ms)": 0.0, "Large Packet Ratio": 0.0,
                                     "Size Distribution": {}})
            t["Transit Size(MB)"] += b["Transit Size(MB)"]
            t["Transit Time(ms)"] += b["Transit Time(ms)"]
            for size, (n, ms) in b["Size Distribution"].items():
                d = t["Size Distribution"].setdefault(size, [0, 0.0])
                d[0], d[1] = d[0] + n, d[1] + ms
    for t in bw.values():
        t["Bandwidth(GB/s)"] = _ratio(t["Transit Size(MB)"], t["Transit Time(ms)"])
    time["Wait Time Ratio"] = _ratio(time["Wait Time(ms)"], time["Wait Time(ms)"] + time["Transit Time(ms)"])
    time["Synchronization Time Ratio"] = _ratio(time["Synchronization Time(ms)"],
                                                time["Synchronization Time(ms)"] + time["Transit Time(ms)"])
    return {"Communication Time Info": dict(time), "Communication Bandwidth Info": bw}


def _link_totals(ops: dict[str, Any]) -> dict[str, Any]:
    total: dict[str, dict[str, Any]] = {}
    for links in ops.values():
        for link, e in links.items():
            t = total.setdefault(link, {"Transport Type": e["Transport Type"], "Transit Time(ms)": 0.0,
                                        "Transit Size(MB)": 0.0})
            t["Transit Time(ms)"] += e["Transit Time(ms)"]
            t["Transit Size(MB)"] += e["Transit Size(MB)"]
    for t in total.values():
        t["Bandwidth(GB/s)"] = _ratio(t["Transit Size(MB)"], t["Transit Time(ms)"])
    return total


def communication(runs: Sequence[Any], extras: Sequence[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(communication.json, communication_matrix.json); both empty when no collective ran."""
    comm: dict[str, dict[str, dict[str, Any]]] = {}
    matrix: dict[str, dict[str, dict[str, Any]]] = {}
    count: dict[tuple[Any, ...], int] = defaultdict(int)
    for run, extra in zip(runs, extras):
        step = f"step{extra['step']}"
        for t in sorted((t for t in run.tasks if t.kind == "hccl"), key=lambda t: t.start_t or 0.0):
            part = _part(t, run, float(extra.get("begin", 0.0)))
            if part is None:
                continue
            time, links, kind = part
            op = t.driver.op
            name = t.name.split(" ")[0]
            n = count[(step, run.device_id, name)]
            count[(step, run.device_id, name)] += 1
            key = f"{name}__{n}_{run.device_id}@{'-'.join(map(str, op.devices))}"
            comm.setdefault(step, {"p2p": {}, "collective": {}})[kind][key] = {
                "Communication Time Info": time, "Communication Bandwidth Info": _bandwidth(links)}
            matrix.setdefault(step, {"p2p": {}, "collective": {}})[kind][key] = {
                link: {**e, "Op Name": key} for link, e in links.items()}
    for steps in comm.values():
        for ops in steps.values():
            if ops:
                ops["Total Op Info"] = _totals(ops)
    for steps in matrix.values():
        for ops in steps.values():
            if ops:
                ops["Total Op Info"] = _link_totals(ops)
    return comm, matrix
