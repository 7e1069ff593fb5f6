"""Pipeline parallelism: the graph cut into one contiguous stage per card, micro-batches
flowing through the stages GPipe-style.

The cut (``passes/partition.py``, by ``passes/pipeline_cut.py``) balances the stages on the cost model: a one-device
plan compiled for one micro-batch (freed of a declared fixed batch first,
``passes/free_batch.py``) gives each node's time and each value's bytes, and a dynamic
program minimizes the slowest stage, the peer copies of the values that cross into it
included. Each stage is compiled as a graph of its own on its card (its own memory plan,
holding only its weights).

A run splits the batch into ``microbatches`` parts and launches everything up front,
ordered only by events, so the simulator overlaps the stages: micro-batch m of stage s
runs once its inputs are on the card (host feeds and peer copies from the stages that
computed them, on the card's copy stream, pulled once the producer finished m) and
stage s finished m-1 (its streams are in order); a copy into stage s's input buffers
waits until stage s finished m-1, and a producer starts m+1 only once every copy of
its m outputs has landed (one buffer per value). Outputs are fetched from the stage that
computes them and concatenated along axis 0 in micro-batch order, so they are those of
one device. ``stats.extra["bubble"]`` is 1 - (busy compute time summed over the cards)
/ (cards x makespan); ``extra["stages"]`` lists each stage's nodes, cost and transfers.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

import numpy as np

from graphexec.cluster.base import SimulatedMode
from graphexec.cluster.cards import Bound, CardsRun, Place, planned
from graphexec.cluster.data import gather
from graphexec.cluster.spread import Cluster, split_batch
from graphexec.cluster.stats import MultiResult, multi_stats
from graphexec.engine.compiled import Compiled, clone_graph, compile, gc_paused
from graphexec.engine.feeds import signature
from graphexec.ir import Graph, TensorType
from graphexec.passes.partition import partition
from graphexec.passes.pipeline_cut import Stage
from graphexec.profiling.record import RunRecord
from graphexec.runtime.stream import Event


class _Pipeline:
    """The stages of one input signature and their plans (plan s on card s)."""

    def __init__(self, graph: Graph, stages: list[Stage], plans: list[Compiled]) -> None:
        self.graph, self.stages, self.plans = graph, stages, plans


class PipelineParallel(SimulatedMode):
    """The ``parallel="pipeline"`` mode (see the module docstring)."""

    name = "pipeline"

    def __init__(self, cluster: Cluster) -> None:
        super().__init__(cluster)
        self._pipes: dict[tuple, _Pipeline] = {}

    def _shares(self, feeds: Mapping[str, Any]) -> tuple[list[str], list[dict[str, Any]]]:
        m = self.cluster.spread.microbatches
        return split_batch(feeds, m, f"{m} micro-batches")

    def pipeline(self, feeds: Mapping[str, Any] | None) -> _Pipeline:
        """The stages and their plans for micro-batches of ``feeds`` (None: the declared
        shapes, one micro-batch each), cut and compiled once per signature."""
        types: dict[str, TensorType] = {}
        graph = self.cluster.graph
        if feeds is not None:
            names, shares = self._shares(feeds)
            graph, types = self._typed(names, shares[0])
        key = signature(types)
        pipe = self._pipes.get(key)
        if pipe is None:
            pipe = self._pipes[key] = self._build(graph, types)
        return pipe

    def _build(self, graph: Graph, types: dict[str, TensorType]) -> _Pipeline:
        cl = self.cluster
        opts = replace(cl.options, input_types=types)
        with gc_paused():   # the whole graph's plan, for its costs only: nothing allocated on a card
            whole = compile(clone_graph(graph), opts, cl.profile)
        system = cl.spread.system
        links = [system.link(max(s - 1, 0), s) if s else system.link(0, 1) for s in range(cl.devices)]
        cut = partition(graph, "pipeline", cl.devices, types, costs=whole, links=links)
        plans = [cl.compile_onto(part.graph, replace(cl.options, input_types=part.input_types), st.index)
                 for st, (part,) in zip(cut.stages, cut.cards)]
        return _Pipeline(graph, cut.stages, plans)

    def compile(self, feeds: Mapping[str, Any] | None) -> Compiled:
        return self.pipeline(feeds).plans[0]

    def _run(self, feeds: dict[str, Any], timing: bool) -> MultiResult:
        pipe = self.pipeline(feeds)
        names, shares = self._shares(feeds)
        rows = shares[0][names[0]].shape[0]
        m, n = len(shares), len(pipe.stages)
        run = CardsRun(self.cluster.server, range(n), timing)
        flow = _Flow(run, pipe)
        for k in range(m):
            for st in pipe.stages:
                flow.step(st, k, shares[k])
        run.finish()
        return self._result(pipe, run, flow, m, rows)

    def _result(self, pipe: _Pipeline, run: CardsRun, flow: "_Flow", m: int, rows: int) -> MultiResult:
        plans, n = pipe.plans, len(pipe.stages)
        stats, each = multi_stats([(p, p.device) for p in plans], self.name, m, sum(p.compile_s for p in plans))
        busy = sum(c["compute_us"] for c in stats.per_device)
        stats.extra["bubble"] = 1.0 - busy / (n * stats.makespan_us) if stats.makespan_us else 0.0
        stats.extra["stages"] = [{"device": st.index, "nodes": len(st.nodes), "cost_us": round(st.cost_us, 3),
                                  "receives": len(st.receives), "outputs": len(st.outputs)} for st in pipe.stages]
        if self.cluster.options.check_hazards:
            stats.extra["hazards"] = [h.to_dict() for p in plans for h in p.device.hazards]
        values: dict[str, Any] = {}
        if not run.timing:
            outputs = pipe.graph.outputs
            mine = [[y for y in st.outputs if y in outputs] for st in pipe.stages]
            parts = [{x: v for s in range(n) for x, v in run.outputs(flow.bound[s][k], mine[s]).items()}
                     for k in range(m)]
            values = gather(parts, outputs, rows)
        return MultiResult(values, stats, RunRecord.of(plans[0].device, plans[0].plan), cards=run.snapshots(),
                           card_stats=each, records=[RunRecord.of(p.device, p.plan) for p in plans])


SLOTS = 2   # buffers per crossing value and side: micro-batch k moves while k - 1 computes


class _Flow:
    """The launches of one pipelined run, double-buffered on both sides of every cut.

    Micro-batch k of stage s: its inputs travel (host copies and peer copies, on the
    card's copy stream) into receive slot k % 2 as soon as the slot is free and the
    producer staged them; once the stage finished k - 1, on-card copies move them into
    the plan's input buffers and the stage runs k. When it finished, its crossing values
    are copied into send slot k % 2 (on the card's send stream, once the peer copies of
    k - 2 have read that slot) and its graph outputs fetched; then it may run k + 1.
    So the peer copies of k + 1 overlap the compute of k on both cards.
    """

    def __init__(self, run: CardsRun, pipe: _Pipeline) -> None:
        self.run, self.pipe = run, pipe
        self.bound: list[list[Bound]] = [[] for _ in pipe.stages]
        self.ends: list[list[list[Event]]] = [[] for _ in pipe.stages]   # [stage][mb]: its streams' ends
        self.staged: list[list[Event]] = [[] for _ in pipe.stages]       # [stage][mb]: outputs staged out
        self.pulled: list[list[list[Event]]] = [[] for _ in pipe.stages]  # [stage][mb]: peer copies that read it
        self.recv: dict[tuple[int, str], list[Place]] = {}
        self.send: dict[tuple[int, str], list[Place | tuple[Bound, str]]] = {}

    def _slots(self, table: dict[tuple[int, str], list[Any]], b: Bound, name: str) -> list[Any]:
        key = (b.card.index, name)
        got = table.get(key)
        if got is None:
            like = planned(b, name)
            assert like is not None, name
            got = table[key] = [self.run.buffer(b.card, like, name) for _ in range(SLOTS)]
        return got

    def step(self, st: Stage, k: int, share: dict[str, Any]) -> None:
        run, s = self.run, st.index
        plan = self.pipe.plans[s]
        b = run.bind(s, plan) if k == 0 else run.again(self.bound[s][k - 1])
        self.bound[s].append(b)
        self.pulled[s].append([])
        ready = self._receive(st, b, k, share)
        self.ends[s].append(run.launch(b, ready + (self.staged[s][k - 1:k])))
        self._stage_out(st, b, k)

    def _receive(self, st: Stage, b: Bound, k: int, share: dict[str, Any]) -> list[Event]:
        """Micro-batch ``k``'s inputs into the receive slots, then into the plan's input
        buffers once the stage finished ``k - 1``; the event after them."""
        run, card, slot = self.run, b.card, k % SLOTS
        dev, stream = card.device, card.copy_stream
        moves: list[tuple[Place, Place]] = []
        for x in st.feeds:
            value, place = share[x], planned(b, x) if x in b.ctx.where else None
            if place is None or not isinstance(value, np.ndarray):
                b.ctx.host[x] = value
                continue
            landing = self._slots(self.recv, b, x)[slot]
            run.upload(stream, landing, value)
            moves.append((landing, place))
        for src in dict.fromkeys(st.receives.values()):
            dev.stream_wait_event(stream, self.staged[src][k])
            for x in (x for x, p in st.receives.items() if p == src):
                landing, place = self._slots(self.recv, b, x)[slot], planned(b, x)
                assert place is not None
                run.move(card, stream, self.send[(src, x)][slot], landing)
                moves.append((landing, place))
            self.pulled[src][k].append(run.record(dev, stream))
        for ev in self.ends[st.index][k - 1] if k else []:
            dev.stream_wait_event(stream, ev)
        for landing, place in moves:
            run.move(card, stream, landing, place)
        return [run.record(dev, stream)]

    def _stage_out(self, st: Stage, b: Bound, k: int) -> None:
        """Once the stage ran ``k``: its crossing values into send slot ``k % 2`` and its
        graph outputs to the host, on the send stream; ``staged`` records the end."""
        run, card = self.run, b.card
        dev, stream = card.device, card.stream("send")
        for ev in self.ends[st.index][k]:
            dev.stream_wait_event(stream, ev)
        if k >= SLOTS:
            for ev in self.pulled[st.index][k - SLOTS]:
                dev.stream_wait_event(stream, ev)
        graph_outputs = set(self.pipe.graph.outputs)
        for x in st.outputs:
            if x not in graph_outputs or any(x in later.receives for later in self.pipe.stages):
                place = planned(b, x)
                if place is None:   # not in the plan's device memory: the peer copy reads it as it is
                    self.send[(card.index, x)] = [(b, x)] * SLOTS
                    continue
                run.move(card, stream, place, self._slots(self.send, b, x)[k % SLOTS])
        outs = [x for x in st.outputs if x in graph_outputs]
        if outs:
            run.fetch(b, outs, stream=stream)
        self.staged[st.index].append(run.record(dev, stream))
