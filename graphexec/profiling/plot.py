"""Gantt charts of runs: one row per stream, kernels coloured by unit (matplotlib)."""

from __future__ import annotations

from typing import Any, Sequence

COLORS = {"cube": "#1f77b4", "vector": "#2ca02c", "aicpu": "#d62728", "copy": "#9467bd"}


def _bars(ax: Any, trace: dict[str, Any], title: str) -> None:
    events = [e for e in trace["traceEvents"] if e.get("ph") == "X" and e.get("pid") == 1]
    streams = sorted({e["tid"] for e in events})
    for e in events:
        row = streams.index(e["tid"])
        if e["cat"] == "event":
            ax.plot([e["ts"]], [row], marker="v" if e["args"]["kind"] == "wait" else "^", color="black", ms=3)
            continue
        unit = e.get("args", {}).get("unit", "copy")
        ax.broken_barh([(e["ts"], max(e["dur"], 1e-3))], (row - 0.4, 0.8), facecolors=COLORS.get(unit, "grey"),
                       edgecolor="white", linewidth=0.3)
    ax.set_yticks(range(len(streams)), [f"stream {s}" for s in streams])
    ax.invert_yaxis()
    ax.set_title(title, fontsize=9, loc="left")


def gantt(traces: Sequence[dict[str, Any]], titles: Sequence[str], path: str) -> None:
    """Write one Gantt panel per trace, stacked, sharing the time axis, to ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    heights = [max(1, len({e["tid"] for e in t["traceEvents"] if e.get("pid") == 1 and e.get("ph") == "X"}))
               for t in traces]
    fig, axes = plt.subplots(len(traces), 1, sharex=True, squeeze=False,
                             figsize=(11, 1.2 + 0.45 * sum(heights) + 0.5 * len(traces)),
                             gridspec_kw={"height_ratios": heights})
    for ax, trace, title in zip(axes[:, 0], traces, titles):
        _bars(ax, trace, title)
    axes[-1, 0].set_xlabel("simulated time (us)")
    fig.legend(handles=[Patch(color=c, label=u) for u, c in COLORS.items()], loc="upper right", ncol=4, fontsize=8)
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    fig.savefig(path, dpi=120)
    plt.close(fig)
