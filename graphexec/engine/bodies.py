"""Control-flow bodies compiled with the plan that holds them.

Once the pass pipeline has run on a graph, each control task's bodies (both branches of
an If, a Loop's or Scan's body) become graphs of their own (``frontend/onnx_body.py``,
typed by the enclosing plan's graph) and go through the same pipeline, recursively, for
every signature the enclosing types fix: the plan carries them (``Plan.bodies``), and the
executor only loads them (``engine/control.py``). A signature known only at run time (a
loop-carried value that changes shape, a Scan of opset 8 whose bodies drop a batch row)
is compiled when it first comes, by the same ``compile``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable

import numpy as np

from graphexec.engine.feeds import signature
from graphexec.frontend.onnx_body import body_graph
from graphexec.ir import Graph, Node, TensorType
from graphexec.passes.control_flow import body_attrs
from graphexec.plan import BodyPlan, CompileOptions, Plan, TaskKind

CompilePlan = Callable[[Graph, CompileOptions], Plan]   # the pipeline, on a graph it may change


def with_bodies(plan: Plan, compile_plan: CompilePlan) -> Plan:
    """``plan`` with each control task's bodies compiled (none: ``plan`` itself)."""
    controls = [t for t in plan.tasks.tasks if t.kind is TaskKind.CONTROL and t.node is not None]
    if not controls:
        return plan
    bodies = {}
    for t in controls:
        assert t.node is not None   # filtered above
        bodies[t.id] = body_plans(t.node, plan.graph, plan.options, compile_plan)
    return replace(plan, bodies=bodies)


def is_scan8(node: Node, graph: Graph) -> bool:
    """A Scan of opset 8: its bodies' inputs drop a batch row, typed only at run time."""
    return node.op == "Scan" and graph.opsets.get("", 1) < 9


def body_plans(node: Node, graph: Graph, options: CompileOptions, compile_plan: CompilePlan) -> tuple[BodyPlan, ...]:
    """The bodies of control node ``node`` of ``graph``, each compiled for the signature
    the enclosing graph's types fix (both branches of an If; a loop body's first
    iteration), where they do."""
    body_opts = replace(options, threads=1, policy=None if options.policy == "manual" else options.policy)
    types = {n: graph.values[n].type for n in node.inputs if n and n in graph.values}
    out = []
    for attr in body_attrs(node):
        g, outside = body_graph(node.attrs[attr], graph, f"{graph.source}:{node.name}/{attr}")
        formal = [n for n in g.inputs if n not in outside]
        opts = replace(body_opts, external=frozenset(outside))
        plans = {}
        known = None if is_scan8(node, graph) else _static_types(node, graph, types, formal, outside)
        if known is not None:
            plans[signature(known)] = compile_plan(g, replace(opts, input_types=known))
        out.append(BodyPlan(g, f"{node.name}/{attr}/", tuple(formal), tuple(outside), opts, plans))
    return tuple(out)


def _static_types(node: Node, graph: Graph, types: dict[str, TensorType], formal: list[str],
                  outside: list[str]) -> dict[str, TensorType] | None:
    """The body's input types as the enclosing graph fixes them, if all are static."""
    given = dict(zip(formal, formal_types(node, [types.get(n) for n in node.inputs], len(formal))))
    given |= dict(zip(outside, [graph.values[n].type if n in graph.values else None for n in outside]))
    known = {n: body_type(t) for n, t in given.items() if t is not None and (t.is_static or t.kind in HOST_KINDS)}
    return known if len(known) == len(formal) + len(outside) else None


HOST_KINDS = ("sequence", "map", "optional")   # containers a signature knows by kind alone


def body_type(t: TensorType) -> TensorType:
    """A static input type as the body's signature holds it: a container by its kind alone."""
    return TensorType(kind=t.kind) if t.kind in HOST_KINDS else t


def formal_types(node: Node, inputs: list[TensorType | None], n_formal: int) -> list[TensorType | None]:
    """The types of a body's formal inputs as the node's input types give them."""
    if node.op == "Loop":
        return [TensorType(np.dtype(np.int64), ()), TensorType(np.dtype(np.bool_), ()), *inputs[2:]][:n_formal]
    if node.op == "Scan":
        n_in = int(node.attrs["num_scan_inputs"])
        states, xs = inputs[:len(inputs) - n_in], inputs[len(inputs) - n_in:]
        axes = list(node.attrs.get("scan_input_axes") or [0] * n_in)
        return [*states, *(_drop_axis(t, a) for t, a in zip(xs, axes))][:n_formal]
    return []


def _drop_axis(t: TensorType | None, axis: int) -> TensorType | None:
    if t is None or t.shape is None or not t.shape:
        return None
    shape = list(t.shape)
    del shape[axis % len(shape)]
    return TensorType(t.dtype, tuple(shape))
