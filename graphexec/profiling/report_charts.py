"""The report's charts as inline SVG (matplotlib): nothing to fetch, and the same input
draws the same bytes (fixed hash salt, no date in the metadata)."""

from __future__ import annotations

import io
from typing import Any, Sequence

from graphexec.profiling.plot import COLORS, bars

WIDTH = 10.5


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams["svg.hashsalt"] = "graphexec"
    plt.rcParams["svg.fonttype"] = "none"   # text stays text: searchable, and small
    return plt


def to_svg(fig: Any) -> str:
    """``fig`` as an ``<svg>`` element (no XML prolog), then closed."""
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None}, bbox_inches="tight")
    _plt().close(fig)
    text = buf.getvalue()
    return text[text.index("<svg"):]


def _steps(ax: Any, series: Sequence[tuple[float, float]], end: float, label: str, color: str) -> None:
    if not series:
        return
    xs = [t for t, _ in series] + [max(end, series[-1][0])]
    ys = [v for _, v in series] + [series[-1][1]]
    ax.step(xs, ys, where="post", label=label, color=color, linewidth=1.2)


def utilization(cores: Sequence[tuple[float, float, float]], hbm: Sequence[tuple[float, float]], peak: dict[str, Any],
                end: float) -> str:
    """Busy cube and vector cores and HBM traffic, each as a share of its peak, over time."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(WIDTH, 2.6))
    cube_peak = peak.get("ai_cores", 1)
    vec_peak = cube_peak if peak.get("coupled", True) else peak.get("vector_cores", 1)
    units = peak.get("units") or {}
    label = {r: (units.get(r) or {}).get("label", f"{r} units") for r in ("cube", "vector")}
    _steps(ax, [(t, 100 * c / cube_peak) for t, c, _ in cores], end, f"{label['cube']} busy", COLORS["cube"])
    _steps(ax, [(t, 100 * v / vec_peak) for t, _, v in cores], end, f"{label['vector']} busy", COLORS["vector"])
    bw = peak.get("hbm_bandwidth_gbps") or 1.0
    _steps(ax, [(t, 100 * g / bw) for t, g in hbm], end, "HBM bandwidth", "#ff7f0e")
    ax.axhline(100, color="grey", linestyle="--", linewidth=0.8, label="peak")
    ax.set_ylabel("% of peak")
    ax.set_xlabel("simulated time (us)")
    ax.set_ylim(0, 110)
    ax.legend(loc="upper right", fontsize=7, ncol=4)
    return to_svg(fig)


def queue_depth(series: Sequence[tuple[float, float]], capacity: int | None, end: float) -> str:
    """Tasks waiting in all command queues over time."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(WIDTH, 2.0))
    _steps(ax, series, end, "queued tasks (all streams)", "#8c564b")
    if capacity:
        ax.set_title(f"queue capacity {capacity} tasks per stream", fontsize=8, loc="left")
    ax.set_ylabel("tasks")
    ax.set_xlabel("simulated time (us)")
    ax.legend(loc="upper right", fontsize=7)
    return to_svg(fig)


def gantt(events: list[dict[str, Any]], title: str) -> str:
    """One lane per stream of each device process, events as markers (``plot.py``'s bars)."""
    plt = _plt()
    from matplotlib.patches import Patch

    events, title = busiest_lanes(events, title)
    trace = {"traceEvents": events}
    lanes = {(e["pid"], e["tid"]) for e in events if e.get("ph") == "X" and e.get("cat") != "launch"}
    fig, ax = plt.subplots(figsize=(WIDTH, 1.0 + 0.4 * max(1, len(lanes))))
    bars(ax, trace, title)
    ax.set_xlabel("simulated time (us)")
    ax.legend(handles=[Patch(color=c, label=u) for u, c in COLORS.items()], loc="upper right", ncol=4, fontsize=7)
    return to_svg(fig)


MAX_LANES = 48   # a lane is 0.4 inch: 48 of them is a page; 20,000 streams drew a 8,000-inch figure


def busiest_lanes(events: list[dict[str, Any]], title: str) -> tuple[list[dict[str, Any]], str]:
    """At most MAX_LANES lanes: the streams with the most kernel time (the rest are in the op
    table), and the title saying so; non-kernel events pass as they are."""
    busy: dict[tuple[Any, Any], float] = {}
    for e in events:
        if e.get("ph") == "X" and e.get("cat") != "launch":
            busy[(e["pid"], e["tid"])] = busy.get((e["pid"], e["tid"]), 0.0) + e["dur"]
    if len(busy) <= MAX_LANES:
        return events, title
    keep = set(sorted(busy, key=lambda lane: (-busy[lane], str(lane)))[:MAX_LANES])
    shown = [e for e in events if e.get("ph") != "X" or (e["pid"], e["tid"]) in keep]
    return shown, f"{title}; the {MAX_LANES} busiest of {len(busy)} streams"


def memory(in_use: Sequence[tuple[float, float]], reserved: Sequence[tuple[float, float]]) -> str:
    """Bytes in use (allocated) and reserved over time, in MiB."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(WIDTH, 2.2))
    end = max([t for t, _ in [*in_use, *reserved]], default=0.0)
    _steps(ax, [(t, v / 2**20) for t, v in in_use], end, "allocated (in use)", COLORS["cube"])
    _steps(ax, [(t, v / 2**20) for t, v in reserved], end, "reserved", "#7f7f7f")
    ax.set_ylabel("MiB")
    ax.set_xlabel("simulated time (us)")
    ax.set_ylim(bottom=0)
    ax.legend(loc="upper right", fontsize=7, ncol=2)
    return to_svg(fig)
