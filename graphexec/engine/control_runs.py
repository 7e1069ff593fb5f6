"""The switch logic of each control op: what a control task reads, launches and writes
at each of its steps (see ``engine/control.py`` for how bodies are compiled and launched).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import numpy as np

from graphexec._limits import over_budget
from graphexec.engine.host_values import held_bytes, owned
from graphexec.errors import GraphExecError, KernelError, OutOfMemoryError
from graphexec.ir import Node
from graphexec.plan import Task
from graphexec.runtime.sim import DeviceTask

if TYPE_CHECKING:
    from graphexec.engine.control import Body, Controller
    from graphexec.engine.executor import ExecContext


MAX_ITERATIONS_VAR = "GRAPHEXEC_MAX_LOOP_ITERATIONS"
DEFAULT_MAX_ITERATIONS = 1_000_000


# Host memory one launched task of a loop body keeps until the run ends (its simulated task,
# its trace and profile records): ru_maxrss over tasks, measured on a Loop of a 20-node
# body (6 tasks an iteration after fusion): 1,473 bytes a task at 1,000 iterations, 1,133
# at 4,000; rounded up.
HOST_BYTES_PER_TASK = 1536


def max_iterations() -> int:
    """How many iterations one Loop may run (``GRAPHEXEC_MAX_LOOP_ITERATIONS``, default a
    million): a trip count of 10**12, or a condition that never turns false, is refused
    rather than run until killed. A value that is no whole number >= 1 is refused as a bad
    option is (``1e3`` and ``0`` were ignored in silence)."""
    text = os.environ.get(MAX_ITERATIONS_VAR, "").strip()
    if not text:
        return DEFAULT_MAX_ITERATIONS
    if not text.isdigit() or int(text) < 1:
        raise GraphExecError(f"{MAX_ITERATIONS_VAR}={text!r}: must be a whole number of iterations >= 1 "
                             f"(default {DEFAULT_MAX_ITERATIONS})")
    return int(text)


def _copy(value: Any) -> Any:
    """A value taken out of a body's buffers, which its next run overwrites (a container's
    tensors were made its own when it was written: ``host_values.owned``)."""
    if isinstance(value, np.ndarray):
        return np.array(value, copy=True)
    return owned(value)


class ControlRun:
    """One execution of a control node in a run; ``step`` is its switch. ``iterates``: its
    body runs again and again on the same outer-scope values (a Loop's, a Scan's), which are
    worth binding once for the run (``Body.launch``)."""

    iterates = False

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
        self.ctx = body.launch(self.parent, control, values, marker, self if self.iterates else None)
        self.iterations += 1
        return True

    def step(self, control: DeviceTask) -> bool:
        raise NotImplementedError


def _trips_decide(body: Body) -> bool:
    """Whether only the trip count can end the loop: the body's condition output is its
    condition input passed on (through Identity nodes), as exporters write a for loop."""
    name = body.graph.outputs[0]
    producers = {o: n for n in body.graph.nodes for o in n.outputs}
    while name in producers and producers[name].op == "Identity" and producers[name].inputs:
        name = producers[name].inputs[0]
    return len(body.formal) > 1 and name == body.formal[1]


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

    iterates = True

    def step(self, control: DeviceTask) -> bool:
        n_carried = len(self.node.inputs) - 2
        if self.ctx is None:
            trips = self.read(0)
            self.trips = None if trips is None else int(np.asarray(trips).reshape(-1)[0])
            if self.trips == np.iinfo(np.int64).max:   # how exporters write a while loop: no trip count
                self.trips = None
            cond = self.read(1)
            self.cond = True if cond is None else _bool(cond, "condition", self.node)
            self.carried = [_copy(self.read(2 + k)) for k in range(n_carried)]
            self.scans: list[list[Any]] = []
            self.scan_bytes = 0
            self.limit = max_iterations()   # a large trip count alone is no error: the condition may end it
            self.decide = self.trips is not None and _trips_decide(self.bodies[0])   # only the trip count ends it
            if self.cond and self.decide and self.trips is not None and self.trips > self.limit:
                raise KernelError(f"node {self.node}: its trip count {self.trips} is past the limit of {self.limit} "
                                  f"iterations, and only the trip count can end it (set {MAX_ITERATIONS_VAR} "
                                  f"to allow more)")   # refused now, not after a million iterations
        else:
            outs = self.outputs()
            self.cond = _bool(outs[0], "body's condition output", self.node)
            self.carried = outs[1:1 + n_carried]
            scans = outs[1 + n_carried:]
            if not self.scans:
                self.scans = [[] for _ in scans]
            for acc, v in zip(self.scans, scans):
                acc.append(v)
            self.scan_bytes += sum(int(getattr(v, "nbytes", 0)) for v in scans)
            self._check_growth()
            self._check_price()
        i = self.iterations
        if self.cond and (self.trips is None or i < self.trips):
            if i >= self.limit:
                of = "" if self.trips is None else f" of its trip count {self.trips}"
                raise KernelError(f"node {self.node}: still running after {i} iterations{of}, the limit "
                                  f"(set {MAX_ITERATIONS_VAR} to allow more)")
            values = [np.array(i, np.int64), np.array(self.cond), *self.carried]
            return self.run_body(control, self.bodies[0], values, f"LabelSwitch {i}")
        n_scans = len(self.node.outputs) - n_carried
        stacked = [np.stack(acc) if acc else self._empty(k) for k, acc in enumerate(self.scans or [[]] * n_scans)]
        self.write(self.carried + stacked)
        return False

    def _check_price(self) -> None:
        """What the loop's iterations keep on the host, priced once its body's size is known
        (after the first iteration): all of them when the trip count says how many, else
        those run so far; past the host budget the loop stops now, not after hours."""
        assert self.ctx is not None
        per_iteration = (len(self.ctx.tasks.tasks) + 2) * HOST_BYTES_PER_TASK   # + the switch's two markers
        known = self.decide and self.cond and self.trips is not None
        n = min(self.trips, self.limit) if known and self.trips is not None else self.iterations
        problem = over_budget(n * per_iteration)
        if problem:
            when = f"{n} iterations" if known else f"after {n} iterations"
            raise KernelError(f"node {self.node}: {when} of {per_iteration // HOST_BYTES_PER_TASK} tasks each, "
                              f"{HOST_BYTES_PER_TASK} bytes of host memory a task: the loop {problem}; set "
                              f"{MAX_ITERATIONS_VAR} lower to stop it earlier")

    def _check_growth(self) -> None:
        """Carried values and scan outputs live on the device: once they outgrow its HBM
        the loop stops with the device's out-of-memory error, not the host's."""
        held = sum(held_bytes(v) for v in self.carried) + self.scan_bytes   # carried sequences too
        capacity = self.parent.device.memory.capacity
        problem = over_budget(held + self.scan_bytes)   # the scan outputs are stacked into a copy at the end
        if problem:
            raise KernelError(f"node {self.node}: its carried and scan values hold {held} bytes after "
                              f"{self.iterations} iterations, and stacking the scans copies them: the loop {problem}")
        if held > capacity:
            raise OutOfMemoryError(f"node {self.node}: its carried and scan values hold {held} bytes after "
                                   f"{self.iterations} iterations, past the {capacity} bytes of device memory")

    def _empty(self, k: int) -> np.ndarray:
        """A scan output of a loop that ran no iteration: zero rows of the body's type."""
        t = self.bodies[0].graph.values[self.bodies[0].graph.outputs[1 + len(self.node.inputs) - 2 + k]].type
        shape = tuple(d if isinstance(d, int) else 0 for d in (t.shape or ()))
        return np.empty((0, *shape), t.dtype or np.float32)


class ScanRun(ControlRun):
    """Scan (opset 9+): inputs states..., scan inputs...; body (states..., slices...) ->
    (states..., scan output slices...), each slice written into its place in the output."""

    iterates = True

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


class Scan8Run(ControlRun):
    """Scan-8: inputs sequence_lens (optional), states..., scan inputs..., all with a batch
    axis 0 and the scan axis 1; the body runs per batch row and step (a row's steps past
    its length are left zero in the scan outputs, as onnxruntime pads them)."""

    iterates = True

    def step(self, control: DeviceTask) -> bool:
        node = self.node
        n_in = int(node.attrs["num_scan_inputs"])
        n_state = len(node.inputs) - 1 - n_in
        if self.ctx is None:
            self.states = [np.array(self.read(1 + k), copy=True) for k in range(n_state)]
            self.xs = [self.read(1 + n_state + k) for k in range(n_in)]
            self.dirs = list(node.attrs.get("directions") or [0] * n_in)
            batch, steps = np.shape(self.xs[0])[:2]
            lens = self.read(0)
            self.lens = [steps] * batch if lens is None else [int(v) for v in np.asarray(lens).reshape(-1)]
            self.order = [(b, t) for b in range(batch) for t in range(self.lens[b])]
            self.ys: list[np.ndarray] = []
        else:
            b, t = self.order[self.iterations - 1]
            outs = self.outputs()
            for state, v in zip(self.states, outs[:n_state]):
                state[b] = v
            if not self.ys:
                batch, steps = np.shape(self.xs[0])[:2]
                self.ys = [np.zeros((batch, steps, *np.shape(v)), np.asarray(v).dtype) for v in outs[n_state:]]
            for y, v in zip(self.ys, outs[n_state:]):
                y[b, t] = v
        k = self.iterations
        if k < len(self.order):
            b, t = self.order[k]
            slices = [x[b, self.lens[b] - 1 - t if d else t] for x, d in zip(self.xs, self.dirs)]
            return self.run_body(control, self.bodies[0], [*(s[b] for s in self.states), *slices],
                                 f"LabelSwitch {k}")
        self.write(self.states + self.ys)
        return False


RUNS: dict[str, type[ControlRun]] = {"If": IfRun, "Loop": LoopRun, "Scan": ScanRun, "Scan8": Scan8Run}
