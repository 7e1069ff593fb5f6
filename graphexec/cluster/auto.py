"""``parallel="auto"``: every implemented mode is tried on a timing-only run of the feeds
(its ``estimate``) and the fastest runs; the choice is kept per input signature. A mode
that cannot split the graph for these feeds (its estimate raises a GraphExecError) is
left out; ``stats.extra["auto"]`` holds each tried mode's estimate (microseconds).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import numpy as np

from graphexec.cluster.spread import MODES, Cluster, Mode
from graphexec.engine.compiled import Compiled
from graphexec.engine.result import Result
from graphexec.errors import GraphExecError


class AutoParallel:
    """Picks among ``modes`` (``cluster/modes.REGISTRY``: read at each choice, not copied)."""

    name = "auto"

    def __init__(self, cluster: Cluster, modes: Mapping[str, Callable[[Cluster], Mode]]) -> None:
        self.cluster = cluster
        self.modes = modes
        self._modes: dict[str, Mode] = {}
        self._choice: dict[tuple, tuple[str, dict[str, float]]] = {}

    def _mode(self, name: str) -> Mode:
        if name not in self._modes:
            self._modes[name] = self.modes[name](self.cluster)
        return self._modes[name]

    def _names(self) -> list[str]:
        return [m for m in MODES if m in self.modes]

    def choose(self, feeds: Mapping[str, Any]) -> tuple[str, dict[str, float]]:
        """The fastest mode's name for ``feeds``, and every tried mode's estimate."""
        key = tuple(sorted((k, getattr(v, "shape", None), str(getattr(v, "dtype", type(v)))) for k, v in feeds.items()))
        if key not in self._choice:
            tried: dict[str, float] = {}
            refused: dict[str, str] = {}
            for name in self._names():
                estimate = getattr(self._mode(name), "estimate", None) if name != "auto" else None
                if estimate is None:
                    continue
                try:
                    tried[name] = float(estimate(dict(feeds)))
                except GraphExecError as e:
                    refused[name] = str(e)
            if not tried:
                why = "; ".join(f"{k}: {v}" for k, v in refused.items()) or "no mode can estimate"
                raise GraphExecError(f"parallel='auto': no mode runs this graph on {self.cluster.devices} "
                                     f"devices ({why})")
            self._choice[key] = (min(tried, key=lambda k: (tried[k], k)), tried)
        return self._choice[key]

    def compile(self, feeds: Mapping[str, Any] | None) -> Compiled:
        name = self.choose(feeds)[0] if feeds is not None else next(m for m in self._names() if m != "auto")
        return self._mode(name).compile(feeds)

    def run(self, feeds: dict[str, Any]) -> Result:
        return self._chosen(feeds, timing=False)

    def simulate(self, feeds: dict[str, Any]) -> Result:
        """The chosen mode's timing-only run, with the same ``stats.extra["auto"]``."""
        return self._chosen(feeds, timing=True)

    def _chosen(self, feeds: dict[str, Any], timing: bool) -> Result:
        name, tried = self.choose(feeds)
        mode: Any = self._mode(name)
        result = mode.simulate(feeds) if timing else mode.run(feeds)
        result.stats.extra["auto"] = {k: float(np.round(v, 3)) for k, v in tried.items()}
        return result
