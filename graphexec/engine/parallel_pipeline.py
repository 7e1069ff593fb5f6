"""Pipeline parallelism: the graph cut into one contiguous stage per card, micro-batches
flowing through the stages GPipe-style.

The cut (``passes/pipeline_cut.py``) balances the stages on the cost model: a one-device
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

from graphexec.engine.compiled import Compiled, clone_graph, compile_graph, default_passes, gc_paused
from graphexec.engine.feeds import signature
from graphexec.engine.multi import Bound, CardsRun
from graphexec.engine.multi_stats import MultiResult, multi_stats
from graphexec.engine.parallel import Cluster, register, split_batch
from graphexec.engine.parallel_base import SimulatedMode
from graphexec.engine.parallel_data import gather
from graphexec.ir import Graph, TensorType
from graphexec.passes.base import CompileState
from graphexec.passes.pipeline_cut import Stage, cut, node_costs, stage_graph, value_bytes
from graphexec.profiling.record import RunRecord
from graphexec.runtime.stream import Event


class _Pipeline:
    """The stages of one input signature and their plans (plan s on card s)."""

    def __init__(self, graph: Graph, stages: list[Stage], plans: list[Compiled]) -> None:
        self.graph, self.stages, self.plans = graph, stages, plans


@register("pipeline")
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
            whole = default_passes(opts).run(CompileState(clone_graph(graph), opts, cl.profile))
        system = cl.spread.system
        links = [system.link(max(s - 1, 0), s) if s else system.link(0, 1) for s in range(cl.devices)]
        stages = cut(graph, cl.devices, node_costs(whole), value_bytes(whole), links)
        known = {n: v.type for n, v in whole.graph.values.items() if v.type.is_static}
        plans = []
        for st in stages:
            g = stage_graph(graph, st, {**known, **types})
            stage_types = {x: types[x] if x in types else known[x] for x in g.inputs}
            plans.append(compile_graph(clone_graph(g), replace(cl.options, input_types=stage_types), cl.profile,
                                       device=cl.device(st.index)))
        return _Pipeline(graph, stages, plans)

    def compile(self, feeds: Mapping[str, Any] | None) -> Compiled:
        return self.pipeline(feeds).plans[0]

    def _run(self, feeds: dict[str, Any], timing: bool) -> MultiResult:
        pipe = self.pipeline(feeds)
        names, shares = self._shares(feeds)
        rows = shares[0][names[0]].shape[0]
        m, n = len(shares), len(pipe.stages)
        run = CardsRun(self.cluster.server, range(n), timing)
        bound: list[list[Bound]] = [[] for _ in range(n)]
        ends: list[list[list[Event]]] = [[] for _ in range(n)]
        landed: list[list[list[Event]]] = [[] for _ in range(n)]   # [producer][mb]: its copies' ends
        for k in range(m):
            for st, plan in zip(pipe.stages, pipe.plans):
                s = st.index
                b = run.bind(s, plan) if k == 0 else run.again(bound[s][k - 1])
                bound[s].append(b)
                dev, copy_stream = b.card.device, b.card.copy_stream
                if k:
                    for ev in ends[s][k - 1]:   # its input buffers are free once it finished k-1
                        dev.stream_wait_event(copy_stream, ev)
                ready = [run.feed(b, {x: shares[k][x] for x in st.feeds})]
                for src in dict.fromkeys(st.receives.values()):
                    for ev in ends[src][k]:
                        dev.stream_wait_event(copy_stream, ev)
                    for x, p in st.receives.items():
                        if p == src:
                            task = run.copy(bound[src][k], x, b, x)
                            task.name = f"{task.name} {x}"   # the trace names the value
                    done = run.record(dev, copy_stream)
                    ready.append(done)
                    landed[src][k].append(done)
                after = ready + (landed[s][k - 1] if k else [])
                ends[s].append(run.launch(b, after))
                landed[s].append([])
                outs = [x for x in st.outputs if x in pipe.graph.outputs]
                if outs:
                    run.fetch(b, outs, ends[s][k])
        run.finish()
        plans = pipe.plans
        stats, each = multi_stats([(p, p.device) for p in plans], self.name, m, sum(p.compile_s for p in plans))
        busy = sum(c["compute_us"] for c in stats.per_device)
        stats.extra["bubble"] = 1.0 - busy / (n * stats.makespan_us) if stats.makespan_us else 0.0
        stats.extra["stages"] = [{"device": st.index, "nodes": len(st.nodes), "cost_us": round(st.cost_us, 3),
                                  "receives": len(st.receives), "outputs": len(st.outputs)} for st in pipe.stages]
        if self.cluster.options.check_hazards:
            stats.extra["hazards"] = [h.to_dict() for p in plans for h in p.device.hazards]
        values: dict[str, Any] = {}
        if not timing:
            outputs = pipe.graph.outputs
            mine = [[y for y in st.outputs if y in outputs] for st in pipe.stages]
            parts = [{x: v for s in range(n) for x, v in run.outputs(bound[s][k], mine[s]).items()} for k in range(m)]
            values = gather(parts, outputs, rows)
        return MultiResult(values, stats, RunRecord.of(plans[0].device, plans[0]), cards=run.snapshots(),
                           card_stats=each)
