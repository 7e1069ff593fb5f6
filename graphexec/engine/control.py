"""Control flow on the device: If, Loop and Scan as GE runs them in a loaded model.

A control task sits on its stream like a kernel. When it starts, its switch (a
StreamSwitch for If, a LabelSwitch per iteration for Loop and Scan) reads the condition or
trip count from device memory, copies the loop-carried values into the body's planned
input buffers, and activates the body: the body's own compiled tasks, with their own
streams and events, enter their queues at the device's clock (no host launch). When the
body's streams drain (a LabelGoto back to the switch), the switch runs again, until the
condition says stop; then the outputs are in place and the control task ends.

Each body is compiled and memory-planned like a graph of its own, with the plan that holds
it (``engine/bodies.py``, ``Plan.bodies``), once per signature of its inputs; here each is
only loaded onto the device. A signature the compile could not know (a loop-carried value
that changes shape between iterations) is compiled by the same pipeline when it comes.
Outer-scope values are read in place from the enclosing run.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from graphexec.engine.bodies import HOST_KINDS, CompilePlan, body_type, is_scan8
from graphexec.engine.control_runs import RUNS, ControlRun
from graphexec.engine.feeds import signature
from graphexec.ir import Graph, Node, TensorType
from graphexec.plan import BodyPlan, Plan, Task
from graphexec.runtime.launch import launch_all
from graphexec.runtime.sim import DeviceTask

if TYPE_CHECKING:
    from graphexec.engine.compiled import Compiled
    from graphexec.engine.executor import ExecContext

LoadPlan = Callable[[Plan], "Compiled"]   # a body's plan onto the enclosing plan's device


def _type_of(value: Any) -> TensorType:
    return TensorType(value.dtype, tuple(value.shape)) if isinstance(value, np.ndarray) else TensorType(kind="other")


@dataclass
class Body:
    """One body of a control node: its compiled plans (``BodyPlan``) and those loaded on
    the device, one per signature."""

    source: BodyPlan
    compile: CompilePlan
    load: LoadPlan
    plans: dict[tuple, "Compiled"] = field(default_factory=dict)
    _sim: Any = None
    _streams: list[Any] = field(default_factory=list)
    _events: list[Any] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.graph: Graph = self.source.graph
        self.label, self.formal, self.outside = self.source.label, list(self.source.formal), list(self.source.outside)
        for key, plan in self.source.plans.items():   # compiled with the enclosing plan: loaded with it
            self.plans[key] = self.load(plan)

    def plan(self, types: dict[str, TensorType]) -> "Compiled":
        key = signature(types)
        compiled = self.plans.get(key)
        if compiled is None:   # a signature no type at compile time fixed
            plan = self.compile(self.graph, replace(self.source.options, input_types=types))
            compiled = self.plans[key] = self.load(plan)
        return compiled

    def launch(self, parent: "ExecContext", control: DeviceTask, values: list[Any], marker: str,
               run: Any = None) -> "ExecContext":
        """Write the formal inputs, then launch the body's tasks on its streams at the
        device's clock, each stream ending in a join that resumes ``control``. ``run``: the
        Loop or Scan run this iteration is one of, over which the outer-scope values stay
        constant (their kernels are bound once per run: ``Steps.bind_outer``); None: not bound."""
        outer = {n: parent.read(n) for n in self.outside}
        types = {n: self._type(n, v) for n, v in [*zip(self.formal, values), *outer.items()]}
        plan = self.plan(types)
        dev = parent.device
        streams, events = self._bind(dev, len(plan.schedule.streams), plan.schedule.num_event_ids)
        ctx = plan.context()
        ctx.streams, ctx.events = dict(enumerate(streams)), dict(enumerate(events))
        ctx.inline, ctx.prefix, ctx.outer = True, parent.prefix + self.label, outer
        for name, value in zip(self.formal, values):
            ctx.write(name, value, streams[0])
        steps = plan.card_steps()   # the body's kernels as a replay calls them (``Steps.inline``), where it may
        if steps is not None and run is not None and outer:
            steps.bind_outer(outer, run)
        if steps is not None and steps.binds_any():
            ctx.log = {}   # the kernels' starts and end are the ones given here (as a multi-card run's)
            ctx.starts, ctx.log_end = steps.inline(ctx, alone=True)   # a body's iterations run one at a time
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

    def _type(self, name: str, value: Any) -> TensorType:
        """An input's type in the signature: a sequence, map or optional by its declared kind
        alone, as the compile knew it (``bodies.body_type``: its length changes every
        iteration, and an empty optional looks like no value at all)."""
        v = self.graph.values.get(name)
        return body_type(v.type) if v is not None and v.type.kind in HOST_KINDS else _type_of(value)

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

    def __init__(self, node: Node, graph: Graph, bodies: tuple[BodyPlan, ...], compile_plan: CompilePlan,
                 load: LoadPlan) -> None:
        self.node = node
        self.scan8 = is_scan8(node, graph)
        self.bodies = [Body(b, compile_plan, load) for b in bodies]

    def start(self, parent: "ExecContext", task: Task) -> "ControlRun":
        return RUNS["Scan8" if self.scan8 else self.node.op](self, parent, task)


def controllers(plan: Plan, compile_plan: CompilePlan, load: LoadPlan) -> dict[int, Controller]:
    """One Controller per control task of ``plan``, its bodies' compiled plans loaded."""
    return {t.id: Controller(t.node, plan.graph, plan.bodies[t.id], compile_plan, load)
            for t in plan.tasks.tasks if t.id in plan.bodies and t.node is not None}
