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

from graphexec.engine.feeds import signature
from graphexec.errors import KernelError
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


def _copy(value: Any) -> Any:
    """A value taken out of a body's buffers, which its next run overwrites."""
    return np.array(value, copy=True) if isinstance(value, np.ndarray) else value


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
        types = {n: graph.values[n].type for n in self.node.inputs if n and n in graph.values}
        for body in self.bodies:
            formal = _formal_types(self.node, [types.get(n) for n in self.node.inputs], len(body.formal))
            outside = [graph.values[n].type if n in graph.values else None for n in body.outside]
            given = dict(zip(body.formal, formal)) | dict(zip(body.outside, outside))
            known = {n: t for n, t in given.items() if t is not None and t.is_static}
            if len(known) == len(body.formal) + len(body.outside):
                body.plan(known)

    def start(self, parent: "ExecContext", task: Task) -> "ControlRun":
        return _RUNS[self.node.op](self, parent, task)


class ControlRun:
    """One execution of a control node in a run; ``step`` is its switch."""

    def __init__(self, ctrl: Controller, parent: "ExecContext", task: Task) -> None:
        self.node, self.bodies, self.parent, self.task = ctrl.node, ctrl.bodies, parent, task
        self.body: Body | None = None
        self.ctx: "ExecContext | None" = None
        self.iterations = 0

    def read(self, i: int) -> Any:
        name = self.node.inputs[i] if i < len(self.node.inputs) else ""
        return self.parent.read(name) if name else None

    def outputs(self) -> list[Any]:
        """The finished body run's outputs, copied out of its buffers."""
        assert self.ctx is not None and self.body is not None
        return [_copy(self.ctx.read(n)) for n in self.body.graph.outputs]

    def write(self, values: list[Any]) -> None:
        stream = self.parent.streams[self.parent.stream_of[self.task.id]]
        for name, value in zip(self.node.outputs, values):
            if name:
                self.parent.write(name, value, stream)

    def run_body(self, control: DeviceTask, body: Body, values: list[Any], marker: str) -> bool:
        self.body = body
        self.ctx = body.launch(self.parent, control, values, marker)
        self.iterations += 1
        return True

    def step(self, control: DeviceTask) -> bool:
        raise NotImplementedError


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


def _bool(value: Any, what: str, node: Node) -> bool:
    arr = np.asarray(value)
    if arr.size != 1:
        raise KernelError(f"node {node}: its {what} must hold one value, got shape {list(arr.shape)}")
    return bool(arr.reshape(-1)[0])


class IfRun(ControlRun):
    def step(self, control: DeviceTask) -> bool:
        if self.ctx is None:
            branch = self.bodies[0 if _bool(self.read(0), "condition", self.node) else 1]
            return self.run_body(control, branch, [], "StreamSwitch")
        self.write(self.outputs())
        return False


class LoopRun(ControlRun):
    """Loop: inputs M (trip count), cond, carried...; body (i, cond, carried...) ->
    (cond, carried..., scan outputs...)."""

    def step(self, control: DeviceTask) -> bool:
        n_carried = len(self.node.inputs) - 2
        if self.ctx is None:
            trips = self.read(0)
            self.trips = None if trips is None else int(np.asarray(trips).reshape(-1)[0])
            cond = self.read(1)
            self.cond = True if cond is None else _bool(cond, "condition", self.node)
            self.carried = [_copy(self.read(2 + k)) for k in range(n_carried)]
            self.scans: list[list[Any]] = []
        else:
            outs = self.outputs()
            self.cond = _bool(outs[0], "body's condition output", self.node)
            self.carried = outs[1:1 + n_carried]
            scans = outs[1 + n_carried:]
            if not self.scans:
                self.scans = [[] for _ in scans]
            for acc, v in zip(self.scans, scans):
                acc.append(v)
        i = self.iterations
        if self.cond and (self.trips is None or i < self.trips):
            values = [np.array(i, np.int64), np.array(self.cond), *self.carried]
            return self.run_body(control, self.bodies[0], values, f"LabelSwitch {i}")
        n_scans = len(self.node.outputs) - n_carried
        stacked = [np.stack(acc) if acc else self._empty(k) for k, acc in enumerate(self.scans or [[]] * n_scans)]
        self.write(self.carried + stacked)
        return False

    def _empty(self, k: int) -> np.ndarray:
        """A scan output of a loop that ran no iteration: zero rows of the body's type."""
        t = self.bodies[0].graph.values[self.bodies[0].graph.outputs[1 + len(self.node.inputs) - 2 + k]].type
        shape = tuple(d if isinstance(d, int) else 0 for d in (t.shape or ()))
        return np.empty((0, *shape), t.dtype or np.float32)


class ScanRun(ControlRun):
    """Scan (opset 9+): inputs states..., scan inputs...; body (states..., slices...) ->
    (states..., scan output slices...), each slice written into its place in the output."""

    def step(self, control: DeviceTask) -> bool:
        node, attrs = self.node, self.node.attrs
        n_in = int(attrs["num_scan_inputs"])
        n_state = len(node.inputs) - n_in
        if self.ctx is None:
            self.states = [_copy(self.read(k)) for k in range(n_state)]
            self.xs = [self.read(n_state + k) for k in range(n_in)]
            axes = list(attrs.get("scan_input_axes") or [0] * n_in)
            self.in_axes = [a % np.ndim(x) for a, x in zip(axes, self.xs)]
            self.in_dirs = list(attrs.get("scan_input_directions") or [0] * n_in)
            lengths = {np.shape(x)[a] for x, a in zip(self.xs, self.in_axes)}
            if len(lengths) != 1:
                raise KernelError(f"node {node}: its scan inputs differ in length along their axes: {sorted(lengths)}")
            self.length = lengths.pop()
            self.ys: list[np.ndarray] = []
        else:
            outs = self.outputs()
            self.states = outs[:n_state]
            self._place(self.iterations - 1, outs[n_state:])
        t = self.iterations
        if t < self.length:
            slices = [np.take(x, self.length - 1 - t if d else t, axis=a)
                      for x, a, d in zip(self.xs, self.in_axes, self.in_dirs)]
            return self.run_body(control, self.bodies[0], [*self.states, *slices], f"LabelSwitch {t}")
        self.write(self.states + self.ys)
        return False

    def _place(self, t: int, slices: list[Any]) -> None:
        """Write iteration ``t``'s slices into the stacked outputs (made at the first)."""
        n = len(slices)
        axes = list(self.node.attrs.get("scan_output_axes") or [0] * n)
        dirs = list(self.node.attrs.get("scan_output_directions") or [0] * n)
        if not self.ys:
            names = self.node.outputs[len(self.states):]
            for name, s, a in zip(names, slices, axes):
                full = list(np.shape(s))
                full.insert(a % (len(full) + 1), self.length)
                self.ys.append(self._target(name, tuple(full), np.asarray(s).dtype))
        for y, s, a, d in zip(self.ys, slices, axes, dirs):
            np.moveaxis(y, a % y.ndim, 0)[self.length - 1 - t if d else t] = s


    def _target(self, name: str, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        """The output's planned bytes when the plan placed it so (stacked in place), else
        a new array."""
        view = self.parent.views.get(name) if name else None
        if isinstance(view, np.ndarray) and view.shape == shape and view.dtype == dtype:
            return view
        return np.empty(shape, dtype)


_RUNS: dict[str, type[ControlRun]] = {"If": IfRun, "Loop": LoopRun, "Scan": ScanRun}


def controllers(tasks: list[Task], graph: Graph, options: CompileOptions,
                compile_body: CompileBody) -> dict[int, Controller]:
    """One Controller per control task, its bodies converted (and compiled on first use)."""
    return {t.id: Controller(t.node, graph, options, compile_body) for t in tasks if t.node is not None}
