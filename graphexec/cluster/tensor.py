"""Tensor parallelism: Megatron-style splits, each card holding its shard of the weights.

The graph is typed for the feeds' shapes and split (``passes/partition.py``, by
``passes/tensor_split.py``): MatMul/Gemm pairs become column- then row-parallel with one
all-reduce (sum) of the partial outputs, a Conv splits by output channels with an
all-gather; everything else is replicated on every card, which computes it identically.
Each card's graph is cut at the collectives into segments, each compiled on its own for
that card (its own memory plan, its own weight shards). A run launches, on every card,
segment after segment, each behind events on what it reads: host copies of graph inputs,
on-card copies of other segments' values, collective results. The collectives run on a
communication stream of their own per card, behind the events of the segment that
computes their input, so segments that do not need a collective's result (an independent
tower) compute while it runs. Outputs are card 0's (every card has the same).
``stats.extra["tensor_splits"]`` says which nodes were split and which stayed replicated
and why.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping, cast

import numpy as np

from graphexec.cluster.base import SimulatedMode
from graphexec.cluster.cards import Bound, CardsRun, Place, planned
from graphexec.cluster.spread import Cluster, split_batch
from graphexec.cluster.stats import MultiResult, multi_stats
from graphexec.cluster.tape import CardsTape
from graphexec.engine.compiled import Compiled, clone_graph, compile, gc_paused
from graphexec.engine.feeds import default_feeds, signature
from graphexec.engine.result import make_stats
from graphexec.hccl import graph_ops as collectives
from graphexec.hccl.graph_ops import Op, Part
from graphexec.ir import Graph
from graphexec.passes.fusion_groups import origin_name
from graphexec.passes.makespan_bounds import fastest_us
from graphexec.passes.partition import partition
from graphexec.passes.tensor_split import Collective, Segment, Worth
from graphexec.plan.tasks import TaskKind
from graphexec.profiling.record import RunRecord
from graphexec.runtime.sim import DeviceTask
from graphexec.runtime.stream import Event, Stream


@dataclass
class Plans:
    """What one feed signature compiles to: per card, per segment, a plan."""

    segments: list[Segment]                 # card 0's (every card's have the same shape)
    cards: list[list[Compiled]]
    collectives: list[Collective]
    report: dict[str, Any]
    compile_s: float


class TensorParallel(SimulatedMode):
    """The ``parallel="tensor"`` mode (see the module docstring)."""

    name = "tensor"

    def __init__(self, cluster: Cluster) -> None:
        super().__init__(cluster)
        self._plans: dict[tuple, Plans] = {}
        self._tapes: dict[int, CardsTape] = {}   # each signature's run, simulated once

    def plans(self, feeds: Mapping[str, Any] | None) -> Plans:
        if feeds is None:
            feeds = default_feeds(self.cluster.graph)
        graph, types = self._typed(split_batch(feeds, 1, "the batch")[0], feeds)   # a declared batch freed
        key = signature(types)
        got = self._plans.get(key)
        if got is None:
            got = self._plans[key] = self._compile(graph, types)
        return got

    def _compile(self, graph: Graph, types: dict[str, Any]) -> Plans:
        cl = self.cluster
        split = partition(graph, "tensor", cl.devices, types, fold=cl.options.fold,
                          worth=lambda typed: _worth(cl, typed, types))
        cards: list[list[Compiled]] = []
        total = 0.0
        for r, parts in enumerate(split.cards):
            plans = []
            for part in parts:
                opts = replace(cl.options, input_types=part.input_types)
                plan = cl.compile_onto(part.graph, opts, r)
                total += plan.compile_s
                plans.append(plan)
            cards.append(plans)
        return Plans(split.segments, cards, split.collectives, split.report, total)

    def compile(self, feeds: Mapping[str, Any] | None) -> Compiled:
        return self.plans(feeds).cards[0][0]

    def describe(self, feeds: Mapping[str, Any] | None) -> list[str]:
        """The splits and the nodes left whole (with why), a line each (``graphexec plan``)."""
        n, report = self.cluster.devices, self.plans(feeds).report
        lines = []
        for x in report["split"]:
            *firsts, last = x["nodes"]
            what = f"{x['kind']}" + (f" ({x['heads']} heads, {x['heads'] // n} per card)" if "heads" in x else "")
            head = f"{' + '.join(firsts)} -> {last}" if firsts else last
            lines.append(f"split {head}: {what}, {x['collective'].replace('_', '-')} of {x['value']!r}")
        lines += [f"whole {x['node']} ({x['op']}): {x['reason']}" for x in report["replicated"]]
        lines.append(f"{report['replicated_nodes']} nodes replicated on every card, {report['segments']} segment(s)")
        return lines

    def _run(self, feeds: dict[str, Any], timing: bool) -> MultiResult:
        p = self.plans(feeds)
        n = self.cluster.devices
        run = CardsRun(self.cluster.server, range(n), timing, tape=self._tapes.get(id(p)), record=not timing)
        bound = [[run.bind(r, plan) for plan in p.cards[r]] for r in range(n)]
        comm = [run.cards[r].stream("comm") for r in range(n)]
        ends: list[list[list[Event]]] = [[] for _ in range(n)]
        landed: dict[tuple[int, str], Event] = {}
        fed: dict[tuple[int, str], tuple[Bound, Event]] = {}   # each feed crosses to a card once
        by_src = {c.src: c for c in p.collectives}
        for k, seg in enumerate(p.segments):
            for r in range(n):
                b = bound[r][k]
                after = [landed[(r, v)] for v in seg.from_collective]
                after += _feed_once(run, b, r, {v: feeds[v] for v in seg.from_feeds}, fed)
                for v, j in seg.from_segment.items():
                    after.append(_local_copy(run, bound[r][j], b, v, ends[r][j]))
                ends[r].append(run.launch(b, after))
            for v in seg.graph.outputs:
                c = by_src.get(v)
                if c is not None:
                    readers = [j for j, s in enumerate(p.segments) if c.dst in s.from_collective]
                    evs = _collective(run, c, [bound[r][k] for r in range(n)],
                                      [[bound[r][j] for j in readers] for r in range(n)], comm,
                                      [ends[r][k] for r in range(n)])
                    landed.update(((r, c.dst), ev) for r, ev in enumerate(evs))
        outputs = self.cluster.graph.outputs
        made = {o: k for k, s in enumerate(p.segments) for o in s.graph.outputs}
        for o in outputs:
            if o in made:
                run.fetch(bound[0][made[o]], [o], ends[0][made[o]])
        run.finish()
        if run.recorded is not None:
            self._tapes[id(p)] = run.recorded   # a signature's Plans stay while the mode does
        first = [(p.cards[r][0], run.cards[r].device) for r in range(n)]
        stats, each = multi_stats(first, self.name, 1, p.compile_s)
        weights = []
        for r, entry in enumerate(stats.per_device):
            entry["weight_bytes"] = sum(make_stats(plan, run.cards[r].device).weight_bytes for plan in p.cards[r])
            weights.append(entry["weight_bytes"])
        extra: dict[str, Any] = {"tensor_splits": p.report}
        if self.cluster.options.check_hazards:
            extra["hazards"] = [h.to_dict() for r in range(n) for h in run.cards[r].device.hazards]
        stats = replace(stats, weight_bytes=max(weights), extra=extra)
        values: dict[str, Any] = {}
        if not timing:
            for o in outputs:   # one no segment computes is an input or a constant
                values.update(run.outputs(bound[0][made[o]], [o]) if o in made else
                              {o: feeds[o] if o in feeds else self.cluster.graph.values[o].const})
        return MultiResult(values, stats, RunRecord.of(run.cards[0].device, p.cards[0][0].plan), cards=run.snapshots(),
                           card_stats=each, records=[RunRecord.of(run.cards[r].device, p.cards[r][0].plan)
                                                     for r in range(n)])


def _worth(cl: Cluster, typed: Graph, types: dict[str, Any]) -> Worth:
    """The cost check of a split: the compute it saves (each node's tasks at their fastest
    in a one-device plan of the typed graph, against the same tasks with 1/n of the work:
    the fixed per-task time stays) must outweigh its collective (on idle links; an
    all-gather's Transpose back included)."""
    opts = replace(cl.options, input_types=types)
    with gc_paused():   # a plan for its costs only: nothing allocated on a card
        whole = compile(clone_graph(typed), opts, cl.profile)
    system, n = cl.spread.system, cl.devices
    devices, profile = tuple(range(n)), system.device_profile
    saves: dict[str, float] = {}
    for t in whole.tasks.tasks:
        if t.node is not None and t.kind is TaskKind.KERNEL:
            part = replace(t, flops=t.flops / n, bytes=t.bytes / n)
            name = origin_name(t.node)   # a fused task's saving is its head node's
            saves[name] = saves.get(name, 0.0) + fastest_us(t, profile) - fastest_us(part, profile)

    def worth(names: list[str], kind: str, nbytes: int) -> str:
        saved = sum(saves.get(x, 0.0) for x in names)
        gamma = collectives.reduce_us_per_byte(profile, np.dtype(np.float32))
        plan = collectives.plan(kind, collectives.choose(system, devices), n, float(nbytes), gamma,
                          1.0 / profile.copy_bytes_per_us("d2d"))
        comm = collectives.estimate_us(system, devices, plan)
        if kind == "all_gather":
            comm += 2.0 * nbytes / profile.hbm_bytes_per_us
        return "" if comm < saved else f"it would save {saved:.1f} us of compute for {comm:.1f} us of {kind}"
    return worth


def _feed_once(run: CardsRun, b: Bound, r: int, feeds: dict[str, Any],
               fed: dict[tuple[int, str], tuple[Bound, Event]]) -> list[Event]:
    """Card ``r``'s segment ``b`` gets ``feeds``: those no earlier segment of the card took
    cross from the host in one upload; the rest are copied on the card from the segment
    that took them (the two towers of a model both reading ``x`` upload it once per card)."""
    new = {v: x for v, x in feeds.items() if (r, v) not in fed}
    after = []
    if new:
        ev = run.feed(b, new)
        after.append(ev)
        fed.update(((r, v), (b, ev)) for v in new)
    for v in feeds:
        if v not in new:
            src, ev = fed[(r, v)]
            after.append(_local_copy(run, src, b, v, [ev]))
    return after


def _local_copy(run: CardsRun, src: Bound, dst: Bound, name: str, after: list[Event]) -> Event:
    """A device-to-device copy of ``name`` from one segment's plan into another's, on the
    card's copy stream, behind ``after``."""
    dev, stream = dst.card.device, dst.card.copy_stream
    for ev in after:
        run.wait(dev, stream, ev)
    here = planned(dst, name)
    assert here is not None, name   # a segment's input has its buffer
    run.move(dst.card, stream, planned(src, name) or (src, name), here)
    return run.record(dev, stream)


def _collective(run: CardsRun, c: Collective, srcs: list[Bound], dsts: list[list[Bound]], comm: list[Stream],
                after: list[list[Event]]) -> list[Event]:
    """The all-reduce (sum) or all-gather (stacked in card order) of ``c.src`` (in ``srcs``,
    one per card) into ``c.dst`` of every reading segment, on each card's communication
    stream behind ``after``; its events."""
    server = run.server
    devices = tuple(b.card.index for b in srcs)
    views = [[cast(Place, planned(b, c.dst)) for b in row] for row in dsts]   # inputs: always planned
    t = srcs[0].plan.graph.values[c.src].type
    nbytes = t.nbytes * (len(devices) if c.kind == "all_gather" else 1)
    dtype = np.dtype(t.dtype)
    profile = server.system.device_profile
    plan = collectives.plan(c.kind, collectives.choose(server.system, devices), len(devices), float(nbytes),
                      collectives.reduce_us_per_byte(profile, dtype), 1.0 / profile.copy_bytes_per_us("d2d"))

    def compute(parts: dict[int, Part]) -> None:
        if run.timing:
            return
        ins = [np.array(srcs[r].ctx.read(c.src)) for r in sorted(parts)]
        if c.kind == "all_gather":
            out = np.stack(ins)
        else:
            out = np.asarray(sum(x.astype(np.float64) if dtype.kind == "f" else x for x in ins)).astype(dtype)
        for r, part in parts.items():
            part.out = _writes([v.view() for v in views[r]], out)

    what = "HcclAllGather" if c.kind == "all_gather" else "HcclAllReduce"
    op = Op(what, (what,), devices, server, plan, compute, len(devices))
    run.collective(op)
    events = []
    for r, b in enumerate(srcs):
        dev = b.card.device
        for ev in after[r]:
            run.wait(dev, comm[r], ev)
        meta = {"link": collectives.link_kinds(server.system, devices, plan) or None, "bytes": nbytes,
                "algorithm": plan.algorithm, "rank": r}
        task = DeviceTask("hccl", comm[r], f"{what} {c.src}", unit="", bytes=float(nbytes), reads=[],
                          writes=[(v.ptr, v.nbytes, c.dst) for v in views[r]], meta=meta)
        part = Part(op, r, dev, task)
        task.driver, task.end_fn = part, part.land
        op.parts[r] = part
        run.rank(dev, task)
        events.append(run.record(dev, comm[r]))
    return events


def _writes(views: list[np.ndarray], data: np.ndarray) -> Callable[[], None]:
    def write() -> None:
        for v in views:
            v[...] = data
    return write
