"""One entry for spreading a graph over cards: ``partition(graph, kind, n, ...)``.

The multi-card modes (``cluster/``) ask this for the graphs each card compiles and run
no pass themselves:

- ``"pipeline"``: contiguous stages balanced on the cost model (``pipeline_cut.py``),
  from a one-device plan of the graph (``costs``) and the links between the cards; card
  ``s`` compiles stage ``s``.
- ``"tensor"``: the graph typed for the inputs (shape inference and constant folding,
  as the shapes pass does them), then Megatron-style splits (``tensor_split.py``) where
  ``worth`` finds the compute saved worth the collective; each card's graph is cut into
  segments at the collectives, and card ``r`` compiles its segments in launch order.

Each part comes with the input types its plan is compiled for.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from graphexec.errors import GraphExecError
from graphexec.ir import Graph, TensorType
from graphexec.ir.clone import clone_graph
from graphexec.passes.pipeline_cut import Stage, cut, node_costs, stage_graph, value_bytes
from graphexec.passes.shape_inference import fold_constants, infer_types
from graphexec.passes.tensor_split import Collective, Segment, Worth, segments, split_graph
from graphexec.plan import Plan
from graphexec.runtime.systems import LinkSpec

KINDS = ("pipeline", "tensor")
SHAPE_ROUNDS = 4   # shape inference and folding alternate: a weight a ConstantOfShape builds becomes a constant


@dataclass(frozen=True)
class Part:
    """One graph a card compiles, and the input types to compile it for."""

    graph: Graph
    input_types: dict[str, TensorType]


@dataclass(frozen=True)
class Partition:
    """The parts of every card (``cards[r]``, in launch order), and what the mode wires
    them by: the pipeline's stages, or the tensor split's collectives, card 0's segments
    (every card's have the same shape) and its report."""

    kind: str
    cards: list[list[Part]]
    stages: list[Stage] = field(default_factory=list)
    collectives: list[Collective] = field(default_factory=list)
    segments: list[Segment] = field(default_factory=list)
    report: dict[str, Any] = field(default_factory=dict)


def partition(graph: Graph, kind: str, n: int, types: dict[str, TensorType], *, costs: Plan | None = None,
              links: Sequence[LinkSpec] = (), fold: bool = True,
              worth: Callable[[Graph], Worth] | None = None) -> Partition:
    """``graph`` spread over ``n`` cards for inputs of ``types``: ``costs`` (a one-device
    plan of ``graph``) and ``links`` (card s - 1 to s) for a pipeline; ``fold`` and
    ``worth`` (given the typed graph, the check of each split) for tensor parallelism."""
    if kind == "pipeline":
        if costs is None:
            raise GraphExecError("a pipeline partition needs a one-device plan of the graph for its costs")
        return _pipeline(graph, n, types, costs, links)
    if kind == "tensor":
        return _tensor(graph, n, types, fold, worth)
    raise GraphExecError(f"partition kind must be one of {', '.join(KINDS)}, not {kind!r}")


def _pipeline(graph: Graph, n: int, types: dict[str, TensorType], costs: Plan,
              links: Sequence[LinkSpec]) -> Partition:
    stages = cut(graph, n, node_costs(costs), value_bytes(costs), list(links))
    known = {name: v.type for name, v in costs.graph.values.items() if v.type.is_static}
    cards = []
    for st in stages:
        g = stage_graph(graph, st, {**known, **types})
        cards.append([Part(g, {x: types[x] if x in types else known[x] for x in g.inputs})])
    return Partition("pipeline", cards, stages=stages)


def typed_graph(graph: Graph, types: dict[str, TensorType], fold: bool = True) -> Graph:
    """A copy of ``graph`` with its inputs of ``types`` and every type inferred from them
    (and constants folded, with ``fold``), as the shapes pass leaves them."""
    typed = clone_graph(graph)
    for name, t in types.items():
        typed.values[name].type = t
    for _ in range(SHAPE_ROUNDS):
        step = fold_constants(typed) if fold else False
        if not (infer_types(typed) or step):
            break
    return typed


def _tensor(graph: Graph, n: int, types: dict[str, TensorType], fold: bool,
            worth: Callable[[Graph], Worth] | None) -> Partition:
    typed = typed_graph(graph, types, fold)
    split = split_graph(typed, n, worth(typed) if worth is not None else None)
    cards = []
    first: list[Segment] = []
    for g in split.cards:
        segs = segments(g, split.collectives)
        first = first or segs
        cards.append([Part(s.graph, {i: s.graph.values[i].type for i in s.graph.inputs}) for s in segs])
    return Partition("tensor", cards, collectives=split.collectives, segments=first,
                     report=dict(split.report, segments=len(first)))
