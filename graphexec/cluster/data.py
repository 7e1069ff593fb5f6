"""Data parallelism: every card runs the whole graph on its share of the batch.

The batch (axis 0 of the inputs that carry it, see ``parallel.split_batch``) is cut into
one equal share per card and, with ``microbatches=M``, each share into M micro-batches
that its card runs one after the other through the same plan (a smaller plan, so less
activation memory per card, for more launches). The graph is compiled once for a part's
shapes (freed of a declared fixed batch first, ``passes/free_batch.py``, when the part's
batch differs) and loaded onto every card: each card has its own memory plan in its own
HBM, with one copy of the weights for every signature (the card's store,
``Cluster.load``). In a run each card copies its inputs in over its host link, runs the
plan behind that copy and copies its outputs out once the plan's streams are done; all
cards run on the server's one clock. The outputs are concatenated along axis 0 in card
order (one that is the same on every card and lacks the batch dim is given once). Every
row goes through the same kernels as on one device, so the outputs are those of one
device running the whole batch wherever a kernel computes rows independently of how many
there are (numpy's do on every light model).
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any, Mapping

import numpy as np

from graphexec.cluster.base import SimulatedMode
from graphexec.cluster.cards import Bound, CardsRun
from graphexec.cluster.spread import Cluster, split_batch
from graphexec.cluster.stats import MultiResult, multi_stats
from graphexec.cluster.tape import CardsTape
from graphexec.engine.compiled import Compiled, clone_graph, compile, gc_paused
from graphexec.engine.feeds import signature
from graphexec.errors import GraphExecError
from graphexec.ir import TensorType
from graphexec.profiling.record import RunRecord


class DataParallel(SimulatedMode):
    """The ``parallel="data"`` mode (see the module docstring)."""

    name = "data"

    def __init__(self, cluster: Cluster) -> None:
        super().__init__(cluster)
        self._plans: dict[tuple, list[Compiled]] = {}
        self._tapes: dict[tuple[int, ...], CardsTape] = {}   # each signature's run, simulated once

    @property
    def parts(self) -> int:
        return self.cluster.devices * self.cluster.spread.microbatches

    def _shares(self, feeds: Mapping[str, Any]) -> tuple[list[str], list[dict[str, Any]]]:
        n, m = self.cluster.devices, self.cluster.spread.microbatches
        return split_batch(feeds, n * m, f"{n} devices" if m == 1 else f"{n} devices x {m} micro-batches")

    def plans(self, feeds: Mapping[str, Any] | None) -> list[Compiled]:
        """One plan per card for the parts of ``feeds`` (None: the declared shapes),
        compiled once and loaded onto every card; cached per signature."""
        types: dict[str, TensorType] = {}
        if feeds is None:
            graph = self.cluster.graph
        else:
            names, shares = self._shares(feeds)
            graph, types = self._typed(names, shares[0])
        key = signature(types)
        plans = self._plans.get(key)
        if plans is None:
            cl = self.cluster
            opts = replace(cl.options, input_types=types)
            t0 = time.perf_counter()
            with gc_paused():
                plan = compile(clone_graph(graph), opts, cl.profile)
                compile_s = time.perf_counter() - t0
                plans = [cl.load(plan, i, compile_s) for i in range(cl.devices)]
            self._plans[key] = plans
        return plans

    def compile(self, feeds: Mapping[str, Any] | None) -> Compiled:
        return self.plans(feeds)[0]

    def _run(self, feeds: dict[str, Any], timing: bool) -> MultiResult:
        plans = self.plans(feeds)
        names, shares = self._shares(feeds)
        rows = shares[0][names[0]].shape[0]
        outputs = plans[0].graph.outputs
        m = self.cluster.spread.microbatches
        key = tuple(id(p) for p in plans)   # a signature's plans stay while the mode does
        run = CardsRun(self.cluster.server, range(len(plans)), timing, tape=self._tapes.get(key), record=not timing)
        parts: list[Bound] = []
        for i, plan in enumerate(plans):
            b = run.bind(i, plan)
            for k in range(m):
                b = run.again(b) if k else b
                ready = run.feed(b, shares[i * m + k])
                run.fetch(b, outputs, run.launch(b, [ready]))
                parts.append(b)
        run.finish()
        if run.recorded is not None:
            self._tapes[key] = run.recorded
        stats, each = multi_stats([(p, p.device) for p in plans], self.name, m, plans[0].compile_s)
        if self.cluster.options.check_hazards:
            stats.extra["hazards"] = [h.to_dict() for p in plans for h in p.device.hazards]
        values = {} if timing else gather([run.outputs(b, outputs) for b in parts], outputs, rows)
        return MultiResult(values, stats, RunRecord.of(plans[0].device, plans[0].plan), cards=run.snapshots(),
                           card_stats=each, records=[RunRecord.of(p.device, p.plan) for p in plans])


def gather(parts: list[dict[str, Any]], names: list[str], rows: int) -> dict[str, Any]:
    """The parts' outputs (each of a part of ``rows`` batch rows) concatenated along axis 0
    in part order; one without the part's rows on axis 0 that is the same in every part
    is given once (a value no input row changes)."""
    out: dict[str, Any] = {}
    for name in names:
        values = [p[name] for p in parts]
        arrays = all(isinstance(v, np.ndarray) and v.ndim >= 1 for v in values)
        if arrays and all(v.shape[0] == rows for v in values):
            out[name] = np.concatenate(values, axis=0)
        elif _same(values):
            out[name] = values[0]
        elif arrays:   # rows of their own per part (a batch flattened into rows): still batch-major
            out[name] = np.concatenate(values, axis=0)
        else:
            raise GraphExecError(f"output {name!r} is not an array with a batch dim (axis 0) and differs "
                                 "between cards: data parallelism cannot gather it")
    return out


def _same(values: list[Any]) -> bool:
    first = values[0]
    if isinstance(first, np.ndarray):
        return all(isinstance(v, np.ndarray) and v.shape == first.shape and v.dtype == first.dtype
                   and v.tobytes() == first.tobytes() for v in values[1:])
    return all(v is first or v == first for v in values[1:])
