"""``graphexec sweep --plot``: speedup per model (rows) and configuration (columns) as a
heat map, each cell its speedup over one stream on one card of the same device (matplotlib, the ``plot``
extra); a point that failed is left blank."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from graphexec._render import plot_text
from graphexec.errors import GraphExecError
from graphexec.sweep.grid import KEY


def config_label(row: dict[str, Any]) -> str:
    """A point's configuration without its model: "ascend910 s4 list x2 data"."""
    cards = f" x{row['devices']} {row['parallel']}" if int(row["devices"]) > 1 else ""
    return f"{row['device']} s{row['streams']} {row['policy'] or 'default'}{cards}"


def plot_speedups(rows: Sequence[dict[str, Any]], path: str) -> None:
    """Write the heat map to ``path`` (the suffix picks the format)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise GraphExecError("--plot needs matplotlib: pip install -e '.[plot]'") from e
    models = list(dict.fromkeys(r["model"] for r in rows))
    configs = list(dict.fromkeys(config_label(r) for r in rows))
    cells = {(r["model"], config_label(r)): r["speedup"] for r in rows}
    grid = np.array([[cells.get((m, c)) if cells.get((m, c)) is not None else np.nan for c in configs]
                     for m in models], dtype=float)
    fig, ax = plt.subplots(figsize=(max(6.0, 0.35 * len(configs) + 3), max(2.5, 0.4 * len(models) + 1.5)))
    im = ax.imshow(grid, aspect="auto", cmap="viridis")
    ax.set_xticks(range(len(configs)), [plot_text(c) for c in configs], rotation=70, ha="right", fontsize=7)
    ax.set_yticks(range(len(models)), [plot_text(m) for m in models], fontsize=8)
    if len(models) * len(configs) <= 200:
        for i, line in enumerate(grid):
            for j, v in enumerate(line):
                if not np.isnan(v):
                    ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=6, color="w")
    fig.colorbar(im, ax=ax, label="speedup over 1 stream, 1 card, same device")
    ax.set_title(f"sweep: {len(rows)} points ({', '.join(KEY[1:])})", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
