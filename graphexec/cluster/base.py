"""What every parallel mode shares: a run and a timing-only estimate of the same launch,
and the graph that takes a part of the batch."""

from __future__ import annotations

from typing import Any, Mapping

from graphexec.cluster.spread import Cluster
from graphexec.cluster.stats import MultiResult
from graphexec.engine.compiled import gc_paused
from graphexec.engine.feeds import check_feeds
from graphexec.errors import FeedError
from graphexec.ir import Graph, TensorType
from graphexec.kernels.quiet import run_quietly
from graphexec.passes.free_batch import free_batch


class SimulatedMode:
    """A mode's ``run`` computes; its ``estimate`` (what ``auto`` compares) launches the same
    tasks with no maths and no bytes moved. A subclass writes ``_run(feeds, timing)``."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self._freed: dict[tuple[str, ...], Graph] = {}

    def run(self, feeds: dict[str, Any]) -> MultiResult:
        with gc_paused(), run_quietly():
            return self._run(feeds, timing=False)

    def simulate(self, feeds: dict[str, Any]) -> MultiResult:
        """A timing-only run: the same launch, no kernel computes, no byte moves."""
        with gc_paused(), run_quietly():
            return self._run(feeds, timing=True)

    def estimate(self, feeds: dict[str, Any]) -> float:
        """The makespan of a timing-only run (what ``auto`` compares)."""
        return self.simulate(feeds).stats.makespan_us

    def _run(self, feeds: dict[str, Any], timing: bool) -> MultiResult:
        raise NotImplementedError

    def _typed(self, names: list[str], part: Mapping[str, Any]) -> tuple[Graph, dict[str, TensorType]]:
        """The graph that takes a part of the batch (its declared batch freed when it must
        be, once per set of inputs), and the part's input types."""
        graph = self.cluster.graph
        try:
            return graph, check_feeds(graph, part)
        except FeedError:
            key = tuple(names)
            freed = self._freed.get(key)
            if freed is None:
                freed = self._freed[key] = free_batch(graph, names)
            if freed is graph:
                raise
            return freed, check_feeds(freed, part)
