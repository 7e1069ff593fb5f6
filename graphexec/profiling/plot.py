"""Gantt charts of runs: one row per stream, kernels coloured by unit (matplotlib)."""

from __future__ import annotations

from typing import Any, Sequence

from graphexec._render import plot_text

COLORS = {"cube": "#1f77b4", "vector": "#2ca02c", "aicpu": "#d62728", "copy": "#9467bd"}


def _names(trace: dict[str, Any]) -> dict[int, str]:
    return {e["pid"]: str(e["args"]["name"]) for e in trace["traceEvents"]
            if e.get("ph") == "M" and e.get("name") == "process_name"}


def _card(pid: int, name: str) -> str:
    """A lane's card: the device id its process name gives ("device 1 (...)"), else its pid."""
    words = name.split()
    return f"card {words[1]}" if len(words) > 1 and words[0] == "device" and words[1].isdigit() else f"card {pid}"


def _lanes(trace: dict[str, Any]) -> tuple[list[dict[str, Any]], list[tuple[int, int]]]:
    """The device events of a trace and its lanes, (pid, tid) in order: one per stream of
    every device process (one process for a single device, one per card for several)."""
    names = _names(trace)
    devices = {pid for pid, name in names.items() if name.startswith("device")} or {1}
    events = [e for e in trace["traceEvents"] if e.get("ph") == "X" and e.get("pid") in devices]
    return events, sorted({(e["pid"], e["tid"]) for e in events}, key=_lane_order)


def _lane_order(lane: tuple[int, int | str]) -> tuple[int, bool, int, str]:
    """Streams by number, then any named by text (a trace from elsewhere may name its tids)."""
    pid, tid = lane
    return (pid, isinstance(tid, str), tid if isinstance(tid, int) else 0, str(tid))


def bars(ax: Any, trace: dict[str, Any], title: str) -> None:
    events, lanes = _lanes(trace)
    for e in events:
        row = lanes.index((e["pid"], e["tid"]))
        if e.get("cat") == "event":
            ax.plot([e["ts"]], [row], marker="v" if e["args"]["kind"] == "wait" else "^", color="black", ms=3)
            continue
        unit = e.get("args", {}).get("unit", "copy")
        ax.broken_barh([(e["ts"], max(e["dur"], 1e-3))], (row - 0.4, 0.8), facecolors=COLORS.get(unit, "grey"),
                       edgecolor="white", linewidth=0.3)
    cards = len({pid for pid, _ in lanes}) > 1
    names = _names(trace)
    ax.set_yticks(range(len(lanes)), [plot_text(f"{_card(p, names.get(p, ''))} stream {t}" if cards else f"stream {t}")
                                      for p, t in lanes])
    ax.invert_yaxis()
    ax.set_title(plot_text(title), fontsize=9, loc="left")


def gantt(traces: Sequence[dict[str, Any]], titles: Sequence[str], path: str) -> None:
    """Write one Gantt panel per trace, stacked, sharing the time axis, to ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    heights = [max(1, len(_lanes(t)[1])) for t in traces]
    fig, axes = plt.subplots(len(traces), 1, sharex=True, squeeze=False,
                             figsize=(11, 1.2 + 0.45 * sum(heights) + 0.5 * len(traces)),
                             gridspec_kw={"height_ratios": heights})
    for ax, trace, title in zip(axes[:, 0], traces, titles):
        bars(ax, trace, title)
    axes[-1, 0].set_xlabel("simulated time (us)")
    fig.legend(handles=[Patch(color=c, label=u) for u, c in COLORS.items()], loc="upper right", ncol=4, fontsize=8)
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    fig.savefig(path, dpi=120)
    plt.close(fig)
