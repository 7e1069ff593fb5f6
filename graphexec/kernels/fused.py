"""Fused kernels: what one task runs after graph fusion (``passes/graph_fusion.py``).

A fused node keeps the nodes it replaced (``node.meta["members"]``, in order); its
runner computes them one after another on the host, so the outputs are the unfused
graph's bit for bit, while the device sees one kernel. Its cost is the fused kernel's:
the members' work, but only the bytes that cross HBM (the inputs from outside the group
and the outputs it leaves), since the intermediates stay in the unified buffer (UB
fusion) or never exist (graph fusion). A BatchNormalization folded into a Conv is a real
rewrite of the filter and bias instead (:func:`fold_batchnorm`), as ATC folds it.
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any, Callable, Mapping

import numpy as np

from graphexec.ir import Graph, Node
from graphexec.kernels import fused_chain
from graphexec.kernels.cost import MAX_BLOCK_DIM, VECTOR_TILE_BYTES, Cost, node_cost
from graphexec.kernels.dispatch import NodeRunner

FUSED_DOMAIN = "graphexec.fused"   # the domain of a node graph fusion made (its runner is a FusedRunner)


def is_fused(node: Node) -> bool:
    return node.domain == FUSED_DOMAIN


class FusedRunner:
    """Runs a fused node's members in order; only the last member may compute into ``out``."""

    def __init__(self, node: Node, graph: Graph) -> None:
        self.node = node
        self.members = [NodeRunner(m, graph) for m in node.meta["members"]]
        self.outputs = [o for o in node.outputs if o]
        self.types = {o: graph.values[o].type for m in node.meta["members"] for o in m.outputs if o in graph.values}

    @property
    def uses_fallback(self) -> bool:
        return any(r.uses_fallback for r in self.members)

    def __call__(self, values: dict[str, Any], out: Any = None) -> dict[str, Any]:
        env = dict(values)
        last = len(self.members) - 1
        for i, r in enumerate(self.members):
            env.update(r(env, out if i == last else None))
        return {o: env[o] for o in self.outputs}

    def bound(self, values: Mapping[str, Any], out: Any = None) -> Callable[[], dict[str, Any]] | None:
        """The same run as ``self(values, out)`` with each member's kernel called directly,
        its arguments fixed where they are ``values`` (views that do not move between
        runs) and taken from earlier members' results otherwise: the replay fast path
        (``engine/steps.py``). A chain of per-element steps after its head runs a block
        of channels at a time (``fused_chain.py``, the same bits). None where a member
        has no kernel of its own (the reference runs it) or reads a value not given."""
        chain = fused_chain.bind(self.members, self.outputs, values, out)
        if chain is not None:
            return chain
        calls: list[tuple[NodeRunner, list[tuple[bool, Any]], dict[str, Any]]] = []
        made: set[str] = set()
        last = len(self.members) - 1
        for i, r in enumerate(self.members):
            if r.fn is None or r.uses_fallback:
                return None
            spec: list[tuple[bool, Any]] = []   # (taken from an earlier member, the value or its name)
            for n in r.node.inputs:
                if n and n not in made and n not in values:
                    return None
                spec.append((True, n) if n in made else (False, values[n] if n else None))
            calls.append((r, spec, {"out": out} if i == last and out is not None and r.takes_out else {}))
            made.update(o for o in r.node.outputs if o)
        return partial(_run_bound, calls, self.outputs)


    def chained(self, values: Mapping[str, Any], out: Any = None) -> tuple[Callable[[], Any], bool] | None:
        """The same run as ``self(values, out)`` as a chain of the members' binds (``KernelDef.bind``):
        each member but the last computes into a scratch array of its own, made once, that the
        next reads; the last into ``out`` where its bind allows. The start returns the last
        member's result; with it, whether that is always ``out``. None unless every member
        has a bind that writes its one output into the array given (a ufunc's ``out=``: what the
        next member reads must be there) and the node's one output is the last member's."""
        env: dict[str, Any] = dict(values)
        calls: list[Callable[[], Any]] = []
        last = len(self.members) - 1
        into = False
        for i, r in enumerate(self.members):
            named = [o for o in r.node.outputs if o]
            if r.bind is None or r.fn is None or r.uses_fallback or len(named) != 1 \
                    or any(n and n not in env for n in r.node.inputs):
                return None
            args = [env[n] if n else None for n in r.node.inputs]
            dst = out if i == last else _scratch(self.types.get(named[0]))
            if i < last and dst is None:
                return None
            takes_out = r.takes_out or getattr(r.bind, "takes_out", False)   # a bind may take what its kernel does not
            bound = r.bind(r.ctx, *args, out=dst) if dst is not None and takes_out else r.bind(r.ctx, *args)
            if bound is not None and dst is not None and not _writes(bound, dst):
                bound = _into(bound, dst) or (None if i < last else bound)
            if bound is None:
                return None
            into = dst is not None and _writes(bound, dst)
            calls.append(bound)
            env[named[0]] = dst
        if self.outputs != [o for o in self.members[-1].node.outputs if o]:
            return None
        return partial(_run_chain, tuple(calls[:-1]), calls[-1]), into


def _scratch(t: Any) -> np.ndarray | None:
    """A member's intermediate, for ``FusedRunner.chained``: an array of its static type."""
    if t is None or not t.is_static or t.dtype is None or t.dtype == object:
        return None
    return np.empty(t.shape, t.dtype)


def _writes(bound: Any, dst: Any) -> bool:
    """Whether the bound call writes its result into ``dst`` and returns it: a one-output
    ufunc called with ``out=dst`` always does, as does a bind's function marked ``writes_out``
    (``binds_norm``)."""
    return type(bound) is partial and bound.keywords.get("out") is dst \
        and (isinstance(bound.func, np.ufunc) and bound.func.nout == 1 or getattr(bound.func, "writes_out", False))


def _into(bound: Any, dst: np.ndarray) -> Any:
    """A one-output ufunc's bound call made to write into ``dst``, where its result has
    exactly ``dst``'s shape and dtype (the same values, computed in place: no cast); None
    for anything else. The result's type is looked at once, on the bound arrays as they
    are (a ufunc's shape and dtype do not depend on the values)."""
    if type(bound) is not partial or not isinstance(bound.func, np.ufunc) or bound.func.nout != 1 \
            or "out" in bound.keywords:
        return None
    res = bound()
    if type(res) is not np.ndarray or res.shape != dst.shape or res.dtype != dst.dtype:
        return None
    return partial(bound.func, *bound.args, out=dst, **bound.keywords)


def _run_chain(first: tuple[Callable[[], Any], ...], last: Callable[[], Any]) -> Any:
    """A fused node's members as their binds (``FusedRunner.chained``): the last one's result."""
    for call in first:
        call()
    return last()


def _run_bound(calls: list[tuple[NodeRunner, list[tuple[bool, Any]], dict[str, Any]]],
               outputs: list[str]) -> dict[str, Any]:
    """A fused node's members called directly (``FusedRunner.bound``); a member that raises
    is what its NodeRunner makes of it (its fallback, or a KernelError), as a plain call."""
    env: dict[str, Any] = {}
    for r, spec, kw in calls:
        args = [env[v] if ref else v for ref, v in spec]
        try:
            res = r.outputs(r.fn(r.ctx, *args, **kw))   # type: ignore[misc]  # ``bound`` checked fn
        except Exception as e:  # noqa: BLE001  (recover re-raises what is not the kernel's to report)
            res = r.recover(e, {n: a for n, a in zip(r.node.inputs, args) if n}, args)
        env.update(res)
    return {o: env[o] for o in outputs}


def value_shapes(graph: Graph, names: list[str]) -> tuple[list, int]:
    """The values' static shapes (None where unknown or absent) and their static bytes: what a
    node's cost rule takes, for lowering and for a fused group's members alike."""
    shapes, total = [], 0
    for n in names:
        t = graph.values[n].type if n else None
        if t is not None and t.is_static:
            shapes.append(t.shape)
            total += t.nbytes
        else:
            shapes.append(None)
    return shapes, total


def member_cost(graph: Graph, node: Node) -> Cost:
    """One member's cost as lowering would price it alone."""
    in_shapes, in_bytes = value_shapes(graph, node.inputs)
    outs = [o for o in node.outputs if o]
    out_shapes, out_bytes = value_shapes(graph, outs)
    return node_cost(node.op, in_shapes, in_bytes, out_shapes, out_bytes, node.attrs, False, node.domain)


def fused_cost(graph: Graph, node: Node, price: Callable[[Node], Cost] | None = None) -> Cost:
    """The fused kernel's cost: every member's flops, the bytes of the fused node's own
    inputs and outputs once (intermediates never go to HBM); a cube member sets the unit
    and tiling (its epilogue runs on its output tiles), else the output's vector tiles.
    ``price``: a member's cost, ``member_cost``'s (lowering's, remembered by kind)."""
    costs = [price(m) if price is not None else member_cost(graph, m) for m in node.meta["members"]]
    _, in_bytes = value_shapes(graph, node.inputs)
    _, out_bytes = value_shapes(graph, [o for o in node.outputs if o])
    flops = float(sum(c.flops for c in costs))
    cube = [c for c in costs if c.unit == "cube"]
    if cube:
        return Cost(flops, float(in_bytes + out_bytes), "cube", cube[0].block_dim)
    blocks = math.ceil(max(out_bytes, 1) / VECTOR_TILE_BYTES)
    return Cost(flops, float(in_bytes + out_bytes), "vector", max(1, min(blocks, MAX_BLOCK_DIM)))


def affine_batchnorm(scale: np.ndarray, bias: np.ndarray, mean: np.ndarray, var: np.ndarray,
                     eps: float) -> tuple[np.ndarray, np.ndarray]:
    """Inference BatchNormalization as y = x * k + s per channel, in float64 (to be folded
    into a Conv's filter and bias: W' = W * k, B' = B * k + s, ConvBatchnormFusionPass)."""
    k = scale.astype(np.float64) / np.sqrt(var.astype(np.float64) + eps)
    return k, bias.astype(np.float64) - mean.astype(np.float64) * k
