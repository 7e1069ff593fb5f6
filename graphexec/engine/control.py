"""Control flow on the device: If, Loop and Scan as GE runs them in a loaded model.

A control task sits on its stream like a kernel. When it starts, its switch (a
StreamSwitch for If, a LabelSwitch per iteration for Loop and Scan) reads the condition or
trip count from device memory, copies the loop-carried values into the body's planned
input buffers, and activates the body: the body's own compiled tasks, with their own
streams and events, enter their queues at the device's clock (no host launch). When the
body's streams drain (a LabelGoto back to the switch), the switch runs again, until the
condition says stop; then the outputs are in place and the control task ends.

Each body is compiled and memory-planned like a graph of its own, once per signature of
its inputs (a loop-carried value may change shape between iterations); its outer-scope
values are read in place from the enclosing run.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from graphexec.engine.control_runs import RUNS, ControlRun
from graphexec.engine.feeds import signature
from graphexec.frontend.onnx_body import body_graph
from graphexec.ir import Graph, Node, TensorType
from graphexec.passes.control_flow import body_attrs
from graphexec.plan import CompileOptions, Task
from graphexec.runtime.launch import launch_all
from graphexec.runtime.sim import DeviceTask

if TYPE_CHECKING:
    from graphexec.engine.compiled import Compiled
    from graphexec.engine.executor import ExecContext

CompileBody = Callable[[Graph, CompileOptions], "Compiled"]


def _type_of(value: Any) -> TensorType:
    return TensorType(value.dtype, tuple(value.shape)) if isinstance(value, np.ndarray) else TensorType(kind="other")


@dataclass
class Body:
    """One body of a control node: its graph and its compiled plans, one per signature."""

    graph: Graph
    label: str                     # trace prefix, "If_0/then_branch/"
    formal: list[str]              # the body's own inputs
    outside: list[str]             # outer-scope names it reads in place
    options: CompileOptions
    compile: CompileBody
    plans: dict[tuple, "Compiled"] = field(default_factory=dict)
    _sim: Any = None
    _streams: list[Any] = field(default_factory=list)
    _events: list[Any] = field(default_factory=list)

    def plan(self, types: dict[str, TensorType]) -> "Compiled":
        key = signature(types)
        compiled = self.plans.get(key)
        if compiled is None:
            opts = replace(self.options, input_types=types)
            compiled = self.plans[key] = self.compile(self.graph, opts)
        return compiled

    def launch(self, parent: "ExecContext", control: DeviceTask, values: list[Any], marker: str) -> "ExecContext":
        """Write the formal inputs, then launch the body's tasks on its streams at the
        device's clock, each stream ending in a join that resumes ``control``."""
        outer = {n: parent.read(n) for n in self.outside}
        types = {n: _type_of(v) for n, v in zip(self.formal, values)} | {n: _type_of(v) for n, v in outer.items()}
        plan = self.plan(types)
        dev = parent.device
        streams, events = self._bind(dev, len(plan.schedule.streams), plan.schedule.num_event_ids)
        ctx = plan.context()
        ctx.streams, ctx.events = dict(enumerate(streams)), dict(enumerate(events))
        ctx.inline, ctx.prefix, ctx.outer = True, parent.prefix + self.label, outer
        for name, value in zip(self.formal, values):
            ctx.write(name, value, streams[0])
        pending = [len(streams)]

        def joined() -> None:
            pending[0] -= 1
            if pending[0] == 0:
                dev.sim.resume(control)

        with dev.on_device():
            for s in streams:
                if dev.checker is not None:
                    dev.checker.activate(control, s)
            dev.launch(DeviceTask("callback", streams[0], ctx.prefix + marker, unit="", meta={"block": False}))
            launch_all(ctx, plan.schedule.order)
            for s in streams:
                dev.launch(DeviceTask("callback", s, ctx.prefix + "LabelGoto", unit="", meta={"block": False},
                                      start_fn=joined))
        return ctx

    def _bind(self, dev: Any, n_streams: int, n_events: int) -> tuple[list[Any], list[Any]]:
        """This run's streams and events of the body (made on first use, then reused by
        every iteration: a wait binds to the record launched just before it)."""
        if self._sim is not dev.sim:
            self._sim, self._streams, self._events = dev.sim, [], []
        while len(self._streams) < n_streams:
            self._streams.append(dev.create_stream())
        while len(self._events) < n_events:
            self._events.append(dev.create_event())
        return self._streams[:n_streams], self._events[:n_events]


class Controller:
    """The bodies of one control node; ``start`` makes the run object its switch steps."""

    def __init__(self, node: Node, graph: Graph, options: CompileOptions, compile_body: CompileBody) -> None:
        self.node = node
        self.scan8 = node.op == "Scan" and graph.opsets.get("", 1) < 9
        self.bodies: list[Body] = []
        body_opts = replace(options, threads=1, policy=None if options.policy == "manual" else options.policy)
        for attr in body_attrs(node):
            g, outside = body_graph(node.attrs[attr], graph, f"{graph.source}:{node.name}/{attr}")
            formal = [n for n in g.inputs if n not in outside]
            self.bodies.append(Body(g, f"{node.name}/{attr}/", formal, outside,
                                    replace(body_opts, external=frozenset(outside)), compile_body))
        self._prebuild(graph)

    def _prebuild(self, graph: Graph) -> None:
        """Compile and plan every body now when the enclosing graph's types fix its inputs
        (both branches of an If; a loop body's first iteration)."""
        if self.scan8:   # its bodies' inputs drop a batch row: typed at run time
            return
        types = {n: graph.values[n].type for n in self.node.inputs if n and n in graph.values}
        for body in self.bodies:
            formal = _formal_types(self.node, [types.get(n) for n in self.node.inputs], len(body.formal))
            outside = [graph.values[n].type if n in graph.values else None for n in body.outside]
            given = dict(zip(body.formal, formal)) | dict(zip(body.outside, outside))
            known = {n: t for n, t in given.items() if t is not None and t.is_static}
            if len(known) == len(body.formal) + len(body.outside):
                body.plan(known)

    def start(self, parent: "ExecContext", task: Task) -> "ControlRun":
        return RUNS["Scan8" if self.scan8 else self.node.op](self, parent, task)


def _formal_types(node: Node, inputs: list[TensorType | None], n_formal: int) -> list[TensorType | None]:
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


def controllers(tasks: list[Task], graph: Graph, options: CompileOptions,
                compile_body: CompileBody) -> dict[int, Controller]:
    """One Controller per control task, its bodies converted (and compiled on first use)."""
    return {t.id: Controller(t.node, graph, options, compile_body) for t in tasks if t.node is not None}
