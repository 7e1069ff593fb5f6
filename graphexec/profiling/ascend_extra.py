"""The rest of ASCEND_PROFILER_OUTPUT: operator_memory.csv, api_statistic.csv,
communication.json and communication_matrix.json, from what the steps recorded.

Formats (the Ascend PyTorch Profiler user guide's tables; the communication files as
torch_npu's CommunicationParser writes them: ``{"step<N>": {"p2p": {...}, "collective":
{"<op>@<group>": {...}, "Total Op Info": {...}}}}``):

- operator_memory.csv: one row per block an op held. An eager card's blocks come from its
  caching allocator (taken when the op was dispatched, given back when its tensor died; the
  totals are the allocator's at both moments; an empty Release Time is a block still held
  when the cycle was saved, as torch_npu leaves a release it did not see). A Session run's
  are its memory plan's activation tensors: held from the start of the task that writes
  one to the end of its last reader, the totals the pool's bytes in use then and its
  reserved size. A block is given back to the pool when it is freed, so Active Release
  Time is Release Time.
- api_statistic.csv: every host call of the steps by CANN API, as msprof's: a kernel
  launch is rtKernelLaunch, a copy rtMemcpyAsync, an event record and wait
  rtEventRecord and rtStreamWaitEvent, a collective its Hccl* name (level HCCL), and a
  graph-mode run's one call ModelExecute (level Model); Time, Count, Avg, Min, Max and the
  population Variance of the calls' host durations.
- communication*.json (only when collectives ran): each rank's part of each collective
  under ``<name>__<n>_<rank>@<group>`` (n: its order among that rank's calls of the name;
  group: the ranks' device ids), since one folder holds every rank this process drove.
  Every part ends when the slowest rank's has arrived and the transfer is done, so Wait
  Time is from the part's start to the last rank's start (all of it synchronization with
  that rank: Synchronization Time is Wait Time), Transit Time from there to the end, Idle
  Time the rest (0). Bandwidth per link kind from the bytes of the rank's own flows in
  the collective's plan over the transit time; packets are not modelled, so Large Packet
  Ratio is 0. The matrix has a ``src-dst`` entry (group ranks) per flow the rank sends.
"""

from __future__ import annotations

import statistics
from bisect import bisect_right
from collections import defaultdict
from typing import Any, Sequence

from graphexec.profiling.counters import live_bytes, live_spans

MB, KB = 1024.0 * 1024.0, 1024.0
OPERATOR_MEMORY_COLUMNS = ("Name", "Size(KB)", "Allocation Time(us)", "Release Time(us)", "Active Release Time(us)",
                           "Duration(us)", "Active Duration(us)", "Allocation Total Allocated(MB)",
                           "Allocation Total Reserved(MB)", "Allocation Total Active(MB)",
                           "Release Total Allocated(MB)", "Release Total Reserved(MB)", "Release Total Active(MB)",
                           "Stream Ptr", "Device Type")
API_COLUMNS = ("Level", "API Name", "Time(us)", "Count", "Avg(us)", "Min(us)", "Max(us)", "Variance")
API = {"kernel": ("Runtime", "rtKernelLaunch"), "memcpy": ("Runtime", "rtMemcpyAsync"),
       "record": ("Runtime", "rtEventRecord"), "wait": ("Runtime", "rtStreamWaitEvent"),
       "callback": ("Runtime", "rtCallbackLaunch")}


def _memory_row(name: str, size: int, t0: float, t1: float | None, at0: tuple[float, float, float],
                at1: tuple[float, float, float] | None, stream: Any, device: int) -> dict[str, Any]:
    dur: float | str = (t1 - t0) if t1 is not None and at1 is not None else ""
    gone = dur != ""
    return {"Name": name, "Size(KB)": size / KB, "Allocation Time(us)": t0, "Release Time(us)": t1 if gone else "",
            "Active Release Time(us)": t1 if gone else "", "Duration(us)": dur, "Active Duration(us)": dur,
            "Allocation Total Allocated(MB)": at0[0] / MB, "Allocation Total Reserved(MB)": at0[1] / MB,
            "Allocation Total Active(MB)": at0[2] / MB,
            "Release Total Allocated(MB)": at1[0] / MB if at1 is not None else "",
            "Release Total Reserved(MB)": at1[1] / MB if at1 is not None else "",
            "Release Total Active(MB)": at1[2] / MB if at1 is not None else "",
            "Stream Ptr": stream, "Device Type": f"NPU:{device}"}


def operator_memory_rows(blocks: Sequence[tuple[Any, ...]], runs: Sequence[Any],
                         extras: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """operator_memory.csv: eager blocks (``_prof_export.blocks``), then each plan's tensors."""
    out = [_memory_row(name, size, t0, t1, a0, a1, stream, card)
           for card, name, size, t0, t1, a0, a1, stream in blocks]
    for run, extra in zip(runs, extras):
        plan = getattr(run, "plan", None)
        if plan is not None:
            out += _plan_rows(run, plan, float(extra.get("begin", 0.0)))
    return out


def _plan_rows(run: Any, plan: Any, begin: float) -> list[dict[str, Any]]:
    sizes = run.activation_sizes()
    series = live_bytes(run.tasks, sizes, plan.tasks.root)
    reserved = float(plan.memory_plan.region_bytes.get("activation", 0))

    times = [ts for ts, _ in series]

    def level(t: float) -> tuple[float, float, float]:
        """The pool's bytes in use at ``t`` (after its changes at ``t``), its reserved size."""
        i = bisect_right(times, t)
        v = float(series[i - 1][1]) if i else 0.0
        return (v, reserved, v)

    rows = []
    for (name, _), (t0, t1, writer) in sorted(live_spans(run.tasks, sizes, plan.tasks.root).items(),
                                              key=lambda kv: kv[1][0]):
        rows.append(_memory_row(f"{writer.name}: {name}", sizes[name], t0 + begin, t1 + begin, level(t0),
                                level(t1), writer.stream.id, run.device_id))
    return rows


def api_rows(runs: Sequence[Any]) -> list[dict[str, Any]]:
    """api_statistic.csv: the host calls of every run, by API, most time first."""
    calls: dict[tuple[str, str], list[float]] = defaultdict(list)
    for run in runs:
        seen: set[tuple[float, float]] = set()
        for lc in run.launches:
            t = lc.task
            if getattr(run, "graph_mode", False):   # one model-execute call launches the whole plan
                if (lc.start, lc.end) not in seen:
                    seen.add((lc.start, lc.end))
                    calls[("Model", "ModelExecute")].append(lc.end - lc.start)
                continue
            key = ("HCCL", t.name.split(" ")[0]) if t.kind == "hccl" else API.get(t.kind, ("Runtime", f"rt_{t.kind}"))
            calls[key].append(lc.end - lc.start)
    out = [{"Level": level, "API Name": name, "Time(us)": sum(d), "Count": len(d), "Avg(us)": sum(d) / len(d),
            "Min(us)": min(d), "Max(us)": max(d), "Variance": statistics.pvariance(d)}
           for (level, name), d in calls.items()]
    return sorted(out, key=lambda r: (-r["Time(us)"], r["Level"], r["API Name"]))
