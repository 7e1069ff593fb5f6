"""The points of a sweep: models x devices x streams x policies x card counts x modes, in
one deterministic order (model outermost, so a model's points are contiguous and its
first point comes first; speedups are over one stream on one card, sweep/run.py)."""

from __future__ import annotations

import itertools
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

from graphexec.errors import GraphExecError

MODEL_SUFFIXES = (".onnx", ".yaml", ".yml")
# The most points one sweep takes. A point is a compile and a timing-only run (milliseconds
# to seconds) and a row held until the sweep ends: 100,000 points are hours of work, and a
# grid of 10^6 was built and submitted whole (2 GB, no row after a minute). Bigger grids
# are refused before any point is made; split them (an --output resumes across runs).
MAX_POINTS = 100_000
KEY = ("model", "device", "streams", "policy", "devices", "parallel")   # the columns that name a point


@dataclass(frozen=True)
class Point:
    """One configuration of one model. ``streams`` and ``policy`` are kept as text ("4",
    "auto"; "" for the graph's default policy) so a point reads back from a CSV unchanged;
    ``parallel`` is "" on one card (no mode spreads anything)."""

    model: str
    device: str
    streams: str
    policy: str
    devices: int
    parallel: str

    @property
    def key(self) -> tuple[str, ...]:
        return tuple(str(v) for v in asdict(self).values())

    def describe(self) -> str:
        cards = f" x{self.devices} {self.parallel}" if self.devices > 1 else ""
        return f"{self.model} {self.device} streams={self.streams} {self.policy or 'default'}{cards}"

    def session_options(self) -> dict[str, Any]:
        """The ``Session`` keywords of this point."""
        streams: int | str = int(self.streams) if self.streams.isdigit() else self.streams
        opts: dict[str, Any] = {"streams": streams, "device": self.device, "policy": self.policy or None}
        if self.devices > 1:
            opts.update(devices=self.devices, parallel=self.parallel)
        return opts


def find_models(paths: Iterable[str | Path]) -> dict[str, Path]:
    """Model name (file stem) -> path, from files and folders (their .onnx/.yaml/.yml
    files, sorted); two models of one name are an error (a row names its model)."""
    found: dict[str, Path] = {}
    for p in map(Path, paths):
        if p.is_dir():
            files = sorted(f for f in p.iterdir() if f.suffix in MODEL_SUFFIXES and f.is_file())
            if not files:
                raise GraphExecError(f"{p}: no .onnx, .yaml or .yml model in this folder")
        elif p.is_file():
            files = [p]
        else:
            raise GraphExecError(f"{p}: no such model file or folder")
        for f in files:
            if f.stem in found and found[f.stem] != f:
                raise GraphExecError(f"two models are named {f.stem!r}: {found[f.stem]} and {f}; rename one")
            found[f.stem] = f
    if not found:
        raise GraphExecError("a sweep needs at least one model")
    return found


def grid(models: Sequence[str], devices: Sequence[str], streams: Sequence[int | str], policies: Sequence[str | None],
         cards: Sequence[int], parallel: Sequence[str]) -> list[Point]:
    """Every point, model outermost then device, streams, policy, cards, mode; on one
    card the modes are one point (nothing is spread)."""
    sizes = {"models": models, "devices": devices, "stream counts": streams, "policies": policies,
             "card counts": cards, "parallel modes": parallel}
    for what, values in sizes.items():
        if not values:
            raise GraphExecError(f"a sweep needs at least one of its {what}")
    distinct = {k: len(dict.fromkeys(map(str, v))) for k, v in sizes.items()}
    total = math.prod(distinct.values())   # counted before one point is made
    if total > MAX_POINTS:
        shape = " x ".join(f"{n:,} {k}" for k, n in distinct.items())
        raise GraphExecError(f"a sweep of up to {total:,} points ({shape}) is more than the {MAX_POINTS:,} one sweep "
                             "takes; split the grid")
    points: list[Point] = []
    seen: set[tuple[str, ...]] = set()
    for m, d, s, p, n, par in itertools.product(models, devices, streams, policies, cards, parallel):
        point = Point(m, d, str(s), p or "", int(n), par if n > 1 else "")
        if point.key not in seen:
            seen.add(point.key)
            points.append(point)
    return points
