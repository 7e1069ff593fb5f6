"""The plausible range of every number in a device or system profile, in one table.

Type and sign are pydantic's business; a range says what a real chip or server can be,
with room to spare, so that a typo or a hostile file (a bandwidth of 1e-320 GB/s, a
launch of 1e308 us, 10^9 cores, a server of 4,000 cards) is refused with the field's
name before anything is built from it, instead of ending in an overflow, an ``Infinity``
in JSON, a simulated time that never comes, or memory spent on cores and links.

A row is ``dotted field (``*`` matches one key) -> (lowest, highest, unit and why)``.
``check`` runs on a profile's raw mapping, before its fields are parsed (so a huge count
is refused before a validator spends memory on it). The tests require a row for every
numeric field of the built-ins, and every built-in inside its rows.
"""

from __future__ import annotations

import math
from typing import Any

Range = tuple[float, float, str]

TIME_US: Range = (0.0, 1e6, "us; up to a second")
RATE_GBPS: Range = (1e-2, 1e5, "GB/s; 10 MB/s (a slow PCIe x1) to 100 TB/s (50x an H100's HBM)")

DEVICE: dict[str, Range] = {
    "ai_cores": (1, 4096, "cores; the biggest chips have 100-200 (H100: 132 SMs)"),
    "vector_cores": (1, 4096, "cores, as ai_cores"),
    "aicpu_cores": (1, 1024, "cores; an SoC's ARM cores"),
    "aicpu_gflops_per_core": (1e-3, 1e4, "GFLOP/s of one scalar core"),
    "peak_tflops.*.*": (1e-3, 1e5, "TFLOPS; a 2024 GPU's densest format is about 1e4"),
    "hbm_capacity_bytes": (1 << 20, 1 << 44, "bytes; 1 MiB to 16 TiB"),
    "hbm_bandwidth_gbps": RATE_GBPS,
    "task_overhead_us": (1e-3, 1e4, "us of device time per task; 1 ns to 10 ms"),
    "launch_cost_us": (1e-3, 1e5, "us of host time per launch; 1 ns to 100 ms"),
    "sync_return_us": (0.0, 1e5, "us; up to 100 ms"),
    "queue_depth": (1, 1 << 20, "tasks per stream's queue"),
    "max_streams": (1, 1 << 16, "streams; CANN allows 1024-2048"),
    "max_events": (1, 1 << 20, "events; CANN allows 1023-65536"),
    "max_tasks_per_stream": (1, 1 << 24, "tasks; CANN splits a stream at about 2000"),
    "copy_bandwidth_gbps.*": RATE_GBPS,
    "kernels.*.split": (1, 1 << 16, "cost tiles per work item"),
    "kernels.*.block_fixed_us": (0.0, 1e4, "us per block"),
    "kernels.*.item_fill_us": (0.0, 1e4, "us per work item"),
    "kernels.*.efficiency.*": (1e-4, 1.0, "fraction of the peak rate"),
    "kernels.*.op_efficiency.*": (1e-4, 1.0, "fraction of the peak rate"),
    "kernels.*.lone_efficiency": (1e-4, 1.0, "fraction of efficiency"),
    "kernels.*.group_c0": (1, 1024, "channels per cube fractal"),
    "layout.c0": (1, 1024, "channels per C0 block of the NC1HWC0 format"),
    "kernels.l2_bytes": (1, 1 << 40, "bytes of on-chip L2"),
    "kernels.l2_bandwidth_gbps": RATE_GBPS,
}

# Links between every ordered pair of cards are built when a system is first used: 10 us
# a link measured (512 cards: 261,632 links, 2.6 s); 512 cards is above the biggest
# single-fabric systems (CloudMatrix 384, 384 NPUs).
MAX_CARDS = 512

SYSTEM: dict[str, Range] = {
    "count": (1, MAX_CARDS, f"cards; links per ordered pair are built up front (at {MAX_CARDS}: "
                            f"{MAX_CARDS * (MAX_CARDS - 1):,} links, 2.6 s)"),
    "topology.*.bandwidth_gbps": RATE_GBPS,
    "topology.*.latency_us": TIME_US,
    "host.bandwidth_gbps": RATE_GBPS,
    "host.latency_us": TIME_US,
    "network.bandwidth_gbps": RATE_GBPS,
    "network.latency_us": TIME_US,
    "collectives.fixed_us": TIME_US,
    "collectives.efficiency": (1e-3, 1.0, "payload share"),
    "collectives.slice_bytes": (0, 1 << 40, "bytes"),
}


def row(table: dict[str, Range], path: str) -> Range | None:
    """The row of ``table`` whose pattern matches the dotted ``path``."""
    if path in table:
        return table[path]
    parts = path.split(".")
    for pattern, limits in table.items():
        want = pattern.split(".")
        if len(want) == len(parts) and all(w in ("*", p) for w, p in zip(want, parts)):
            return limits
    return None


def numbers(data: Any, prefix: str = "") -> list[tuple[str, float]]:
    """(dotted path, value) of every int/float leaf of a raw mapping (bools and lists skipped)."""
    out: list[tuple[str, float]] = []
    if isinstance(data, dict):
        for key, value in data.items():
            if key == "sources" and not prefix:
                continue
            if isinstance(value, dict):
                out += numbers(value, f"{prefix}{key}.")
            elif isinstance(value, (int, float)) and not isinstance(value, bool):
                out.append((f"{prefix}{key}", value))
    return out


def check(data: Any, table: dict[str, Range]) -> None:
    """Raise ValueError naming the first number of ``data`` outside its row's range."""
    for path, value in numbers(data):
        limits = row(table, path)
        if limits is None:
            continue   # not a field of the profile: pydantic names it
        lo, hi, unit = limits
        if not math.isfinite(value) or value < 0 or (value == 0 and lo > 0):
            continue   # the field's type refuses these with its own words (finite, > 0, >= 1)
        if not lo <= value <= hi:
            raise ValueError(f"field '{path}': {value!r} is outside the plausible range {_shown(lo)} to {_shown(hi)} "
                             f"({unit})")


def _shown(limit: float) -> str:
    return str(int(limit)) if float(limit).is_integer() else f"{limit:g}"
