"""Run one node on the host: its own kernel if one serves the case, else the fallback."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable

import numpy as np

from graphexec.errors import KernelError, UnsupportedOpError
from graphexec.ir import Graph, Node
from graphexec.kernels import registry
from graphexec.kernels.fallback import Fallback, is_known
from graphexec.kernels.registry import OpContext, Unsupported, as_outputs

Runner = Callable[[dict[str, Any]], dict[str, Any]]


class NodeRunner:
    """Computes a node's outputs from a dict of its input values.

    Built once per node at compile time; ``uses_fallback`` tells lowering whether the
    node runs as an own (AI-core) kernel or through the reference (AI-CPU).
    """

    flips = 0   # how many runners have turned to their fallback so far (``recover``)

    def __init__(self, node: Node, graph: Graph) -> None:
        self.node = node
        kdef = registry.lookup_def(node.op, node.domain, graph.opsets.get(node.domain or "", 1))
        self.fn = None if kdef is None else kdef.fn
        self.bind = None if kdef is None else kdef.bind
        # only a single-output kernel that declares ``out=`` gets the output's device bytes
        named = [o for o in node.outputs if o]
        self.single = named[0] if len(node.outputs) == 1 and named else None   # the one output, if the node has one
        self.takes_out = kdef is not None and kdef.out and len(named) == 1
        consts = tuple(bool(n) and n in graph.values and graph.values[n].const is not None for n in node.inputs)
        self.ctx = OpContext(node.op, node.attrs, graph.opsets.get(node.domain or "", 1),
                             len(node.outputs), node.name, consts)
        if self.fn is None and not is_known(node, graph):
            raise UnsupportedOpError(f"{graph.source}: node {node}: no kernel or fallback knows op "
                                     f"{node.domain or 'ai.onnx'}::{node.op}")
        if kdef is not None and kdef.check is not None:
            self._check(kdef.check, graph)
        self._graph = graph
        self._fallback: Fallback | None = None
        self.uses_fallback = self.fn is None
        self.fallback_calls = 0       # runs through the reference so far, and their host seconds
        self.fallback_s = 0.0

    def _check(self, check: registry.CheckFn, graph: Graph) -> None:
        """Refuse at compile time a node whose attributes the kernel refuses, where the
        fallback cannot run it either (else the first run would fail)."""
        why = check(self.ctx)
        if why is not None and not is_known(self.node, graph):
            node = self.node
            raise UnsupportedOpError(f"node {node.name or '<unnamed>'} ({node.domain or 'ai.onnx'}::{node.op}): {why}")

    def fallback(self) -> Fallback:
        if self._fallback is None:
            self._fallback = Fallback(self.node, self._graph)
        return self._fallback

    def __call__(self, values: dict[str, Any], out: Any = None) -> dict[str, Any]:
        """The node's outputs by name; ``out``, when given, is the view of its one output
        that the kernel may compute into (it then returns that very array)."""
        if self.fn is not None and not self.uses_fallback:
            args = [values[n] if n else None for n in self.node.inputs]
            try:
                if out is not None and self.takes_out:
                    return self.outputs(self.fn(self.ctx, *args, out=out))
                return self.outputs(self.fn(self.ctx, *args))
            except Exception as e:  # noqa: BLE001  (recover re-raises what is not the kernel's to report)
                return self.recover(e, values, args)
        return self._run_fallback(values)

    def outputs(self, res: Any) -> dict[str, Any]:
        """The kernel's return value by output name."""
        if type(res) is np.ndarray and self.single is not None:
            return {self.single: res}
        # a 0-d result may come back as a numpy scalar: keep it an array
        return {o: np.asarray(v) if isinstance(v, np.generic) else v
                for o, v in zip(self.node.outputs, as_outputs(res)) if o}

    def recover(self, exc: Exception, values: dict[str, Any], args: list[Any]) -> dict[str, Any]:
        """What a call does when the kernel raised ``exc`` on ``args`` (``values`` by name):
        a case the kernel does not serve goes to the fallback, now and on later runs (which
        bumps ``NodeRunner.flips``: callers that hold the kernel itself look again), bad
        values are a KernelError, anything else is a bug and goes on up."""
        if isinstance(exc, Unsupported):
            self.uses_fallback = True
            NodeRunner.flips += 1
            return self._run_fallback(values)
        if isinstance(exc, (ValueError, TypeError, LookupError, ArithmeticError, MemoryError)):   # bad values, not bugs
            shapes = ", ".join(f"{np.shape(a)}" for a in args if a is not None)
            raise KernelError(f"node {self.node}: kernel {self.node.op} failed on inputs {shapes}: {exc}") from None
        raise exc

    def _run_fallback(self, values: dict[str, Any]) -> dict[str, Any]:
        node = self.node
        t0 = time.perf_counter()   # the reference is slow enough that timing it costs nothing
        try:
            return self.fallback()(values)
        except UnsupportedOpError:
            raise
        except Exception as e:  # noqa: BLE001  (the reference raises anything)
            raise KernelError(f"node {node}: {node.op} failed in the onnx reference fallback: "
                              f"{type(e).__name__}: {e}") from None
        finally:
            self.fallback_calls += 1
            self.fallback_s += time.perf_counter() - t0


@dataclass(frozen=True, slots=True)
class FallbackUse:
    """One op type that ran through the onnx reference: its nodes, calls and host seconds."""

    op: str
    domain: str
    nodes: int
    calls: int
    seconds: float


def node_runners(runners: Iterable[Any]) -> Iterable[NodeRunner]:
    """The NodeRunners in ``runners``, a fused chain's members and a wrapped runner's inner one included."""
    for r in runners:
        if isinstance(r, NodeRunner):
            yield r
        elif hasattr(r, "members"):
            yield from node_runners(r.members)
        elif hasattr(r, "plain"):   # a host-fused Conv: its plain runner falls back for it
            yield from node_runners([r.plain])
        elif hasattr(r, "inner"):
            yield from node_runners([r.inner])


def fallback_uses(runners: Iterable[Any]) -> list[FallbackUse]:
    """Per op type run by the reference fallback so far, most host time first: what a user
    reads to see which ops have no own kernel on their model, and what that costs."""
    by_op: dict[tuple[str, str], list[NodeRunner]] = {}
    for r in node_runners(runners):
        if r.fallback_calls:
            by_op.setdefault((r.node.domain, r.node.op), []).append(r)
    uses = [FallbackUse(op, domain, len(rs), sum(r.fallback_calls for r in rs), sum(r.fallback_s for r in rs))
            for (domain, op), rs in by_op.items()]
    return sorted(uses, key=lambda u: (-u.seconds, u.domain, u.op))
