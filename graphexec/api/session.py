"""Session: compile a graph once per input-shape signature, run it on the emulated device.

Example:
    >>> import graphexec as gx
    >>> session = gx.Session(gx.load("models/inception_block.onnx"), streams=1)
    >>> result = session.run({"data": x})
    >>> result.outputs["out"].shape, result.stats.makespan_us
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import replace
from os import PathLike
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from graphexec._limits import collect_due, gc_paused, promote_young
from graphexec.api.decode import Decoded, decode
from graphexec.api.inspect import TensorInfo, tensor_info
from graphexec.api.lowered import save_lowered
from graphexec.api.simulate import computed, control_flow, simulate_cards
from graphexec.cluster import Mode, check_spread, start
from graphexec.engine.compiled import Compiled, clone_graph, compile
from graphexec.engine.device_tensor import DeviceTensor
from graphexec.engine.feed_values import as_feeds, check_mapping
from graphexec.engine.feeds import check_feeds, declared_types, default_feeds, feeds_key, signature
from graphexec.engine.loaded import run
from graphexec.engine.resident import LoadedPlans
from graphexec.engine.result import Result, select
from graphexec.engine.threads import Workers
from graphexec.errors import GraphExecError
from graphexec.frontend import load
from graphexec.frontend.measured import load_measured
from graphexec.frontend.options import check_session_options
from graphexec.ir import Graph
from graphexec.passes.fusion_switch import read_switch_file
from graphexec.passes.precision import NUMERICS, resolve
from graphexec.plan import CompileOptions, MeasuredTimes, MemoryPlan
from graphexec.runtime.profiles import DeviceProfile, load_profile
from graphexec.runtime.systems import SystemProfile

_KEEP_NONE: frozenset[str] = frozenset()


class Session:
    """A graph bound to a device and options, ready to run.

    Args:
        graph: a Graph, or anything ``gx.load`` accepts (a path, a ModelProto).
        streams: how many streams tasks may use (an int >= 1, or "auto"). None: the
            graph's own options (a YAML graph's ``options:``), else 1; a graph with a
            hand-written schedule then runs on its streams.
        device: a built-in profile name ("ascend910", ...) or a profile YAML path; None:
            the graph's options, else "ascend910".
        memory: "reuse" (intermediates share pool blocks when the schedule orders them),
            "none" (each gets its own bytes) or "joint" (also add events that let more
            tensors share, when that shrinks the pool; the cost in time is reported).
        memory_reuse: False is the same as memory="none".
        check_hazards: record byte ranges and report unsynchronized accesses.
        launch: "graph" (GE's static-graph execution: the task list is loaded with the
            model, a run pays no host launch cost per task) or "host" (every task is
            launched from the host at the profile's launch cost, as single-op execution).
        threads: host threads for the kernels' numpy math (1: the run's own thread only).
            Outputs, stats and trace are the same whatever the number.
        devices: cards of ``system`` to spread the graph over (1: one device, as above).
        parallel: how to spread it: "data", "pipeline", "tensor" or "auto" (see
            ``cluster/spread.py``); ``streams`` is then per card.
        microbatches: parts each card's share of the batch is run in.
        system: a built-in system name, a system YAML path or a SystemProfile; None: the built-in whose
            cards are ``device`` (atlas800-910 for ascend910, ...).
        compute: False makes every ``run`` a timing-only ``simulate`` (no outputs).
        max_plans: how many input-shape signatures' plans stay loaded on the session's
            device (None: all). The plans share one device and one copy of the weights;
            past the bound, or when the device's memory runs out, the least recently used
            plan is evicted (its pools freed; compiled again if its shapes come back).
        fusion: GE/ATC's graph and UB fusion in graph mode (``passes/graph_fusion.py``).
        fusion_switch_file: an ATC fusion switch file (JSON or ``Rule:off`` lines) whose
            "off" rules are not applied (``passes/fusion_switch.py``).
        precision_mode: ATC's precision mode the kernels are timed in (``passes/precision.py``);
            None: the chip's default (force_fp16 on Ascend chips).
        precision_numerics: "model" (outputs as the ONNX model defines them) or "device" (as the
            mode computes them: lower-precision operands, so its accuracy cost shows).
        measured: an msprof op_summary CSV (or its PROF_ folder), a Chrome/Kineto kernel trace,
            or ``MeasuredTimes``: the ops it measured take their measured durations instead of
            the cost model's (``passes/measured.py``), so what-ifs start from a real run.
    """

    def __init__(self, graph: Graph | Any, streams: int | str | None = None,
                 device: str | DeviceProfile | None = None, *, policy: str | None = None, memory: str = "reuse",
                 memory_reuse: bool = True, fold: bool = True, check_hazards: bool = False,
                 launch: str = "graph", threads: int = 1, devices: int = 1, parallel: str = "data",
                 microbatches: int = 1, system: str | SystemProfile | None = None, compute: bool = True,
                 max_plans: int | None = None, fusion: bool = True, fusion_switch_file: str | None = None,
                 precision_mode: str | None = None, precision_numerics: str = "model",
                 measured: str | MeasuredTimes | None = None) -> None:
        check_session_options(policy=policy, fold=fold, check_hazards=check_hazards, memory_reuse=memory_reuse,
                              device=device)   # the YAML options' rules, one path (streams: _check_streams)
        if memory not in ("reuse", "none", "joint"):
            raise GraphExecError(f"memory must be 'reuse', 'none' or 'joint', not {memory!r}")
        if launch not in ("graph", "host"):
            raise GraphExecError(f"launch must be 'graph' or 'host', not {launch!r}")
        self.graph = graph if isinstance(graph, Graph) else load(graph)
        own = self.graph.meta.get("options", {})
        manual = "schedule" in self.graph.meta and streams is None and policy is None
        streams = streams if streams is not None else own.get("streams", 1)
        if manual:
            streams, policy = max(1, len(self.graph.meta["schedule"]["streams"])), "manual"
        policy = policy if policy is not None else own.get("policy")
        self.profile = load_profile(device if device is not None else own.get("device", "ascend910"))
        spread = check_spread(devices, parallel, microbatches, system, self.profile, device is not None)
        self.profile = self.profile if spread is None else spread.system.device_profile
        self.threads = _check_threads(threads)
        self.compute = bool(compute)
        self.options = CompileOptions(_check_streams(streams, self.profile), policy,
                                      memory if memory_reuse else "none", fold, check_hazards, launch, self.threads,
                                      fusion=bool(fusion), fusion_off=_switches(fusion_switch_file),
                                      precision_mode=resolve(precision_mode, self.profile),
                                      precision_numerics=_numerics(precision_numerics),
                                      measured=load_measured(measured) if isinstance(measured, (str, PathLike))
                                      else measured)
        self.plans = LoadedPlans(self.profile, self.options, _check_max_plans(max_plans))   # one device, LRU
        self._seen: dict[tuple[Any, ...], Compiled] = {}   # ``feeds_key`` of feeds checked before -> their plan
        self._last: Compiled | None = None
        self._workers: Workers | None = None
        self.multi: Mode | None = None if spread is None else start(spread, self.graph, self.options)
        self._lock = threading.RLock()   # one run at a time: a plan's buffers and the device are the session's

    def compile(self, feeds: Mapping[str, Any] | None = None) -> Compiled:
        """The compiled plan for the shapes of ``feeds`` (declared shapes if None: the plan
        of ``default_feeds`` when those are static), cached; on several devices, card 0's."""
        with self._lock:
            return self._compile(feeds)

    def _compile(self, feeds: Mapping[str, Any] | None) -> Compiled:
        if self.multi is not None:
            self._last = self.multi.compile(feeds)
            return self._last
        if feeds is not None:   # before feeds_key reads it
            check_mapping(feeds)
        seen = feeds_key(feeds) if feeds is not None else None
        compiled = self._seen.get(seen) if seen is not None else None
        if compiled is None:
            types = check_feeds(self.graph, feeds) if feeds is not None else declared_types(self.graph)
            key = signature(types)
            compiled = self.plans.get(key)
            if compiled is None:
                opts = replace(self.options, input_types=types)
                with gc_paused():   # until the compile's objects are promoted (a large one's) or walked
                    compiled = self.plans.load(key, lambda: compile(clone_graph(self.graph), opts, self.profile))
                    promote_young()
                self._seen = {k: c for k, c in self._seen.items() if self.plans.holds(c)}   # none evicted
                collect_due()   # the compile's young objects are walked here, not at the next run's start
            if seen is not None:
                self._seen[seen] = compiled
        self.plans.use(compiled)
        self._last = compiled
        return compiled

    def run(self, feeds: Mapping[str, Any], keep: Iterable[str] = (), outputs: Sequence[str] | None = None) -> Result:
        """Run the graph on ``feeds`` (name -> array); outputs come in graph order, or with
        ``outputs`` (names, as onnxruntime's ``output_names``) just those, in that order
        (the whole graph runs: the stats and trace are the full run's).
        A session made with ``compute=False`` simulates instead (see ``simulate``). Runs
        from several threads take turns (each gets its own, correct, result).

        ``keep`` names outputs to leave on the device: each comes back as a
        ``DeviceTensor`` (``engine/device_tensor.py``), and a later run of this session
        takes it as a feed with no host copy (a decode loop's KV cache)."""
        if outputs is not None:
            return select(self.run(feeds, keep), outputs, self.graph.outputs)
        if not self.compute:
            return self.simulate(feeds)
        kept = frozenset(keep) if keep else _KEEP_NONE
        if kept:
            unknown = sorted(kept - set(self.graph.outputs))
            if unknown:
                raise GraphExecError(f"keep: {unknown[0]!r} is not an output of the graph")
        if self.multi is not None and (kept or any(isinstance(v, DeviceTensor) for v in feeds.values())):
            raise GraphExecError("keep and DeviceTensor feeds: tensors stay on the device of a one-card session only")
        with self._lock:
            return self._run(as_feeds(self.graph, feeds), kept)

    def _run(self, feeds: dict[str, Any], keep: frozenset[str] = frozenset()) -> Result:
        if self.multi is not None:
            result = self.multi.run(feeds)
            self._last = self.multi.compile(feeds)
            return result
        compiled = self._compile(feeds)   # the lock is held
        if self.threads > 1 and self._workers is None:
            self._workers = Workers(self.threads)
            weakref.finalize(self, self._workers.pool.shutdown, wait=False)
        return run(compiled, feeds, workers=self._workers, keep=keep)

    def simulate(self, feeds: Mapping[str, Any] | None = None,
                 shapes: Mapping[str, tuple[int, ...]] | None = None) -> Result:
        """A timing-only run: the stats, trace, memory plan and diagnosis that ``run`` gives
        for these feeds (or inputs of ``shapes``; neither: the declared shapes), computing
        no kernel; ``outputs`` is empty. A graph whose timeline values decide (control flow,
        outputs sized at run time) is computed instead, on ``feeds`` or the deterministic
        inputs ``graphexec run`` makes, and ``stats.extra["computed"]`` says why
        (``api/simulate.py``).

        Example:
            >>> gx.Session(graph, streams=4).simulate(shapes={"data": (8, 3, 224, 224)}).stats.makespan_us
        """
        if feeds is not None and shapes is not None:
            raise GraphExecError("simulate takes feeds or shapes, not both")
        given = as_feeds(self.graph, feeds) if feeds is not None else None
        with self._lock:
            return self._simulate(given, shapes)

    def _simulate(self, given: dict[str, Any] | None, shapes: Mapping[str, tuple[int, ...]] | None) -> Result:
        run_feeds = given if given is not None else default_feeds(self.graph, shapes, self.profile)
        if self.multi is not None:
            why = control_flow(self.graph) or self.multi.compile(run_feeds).needs_values
            result = simulate_cards(self.multi, run_feeds) if why is None else computed(self.multi.run(run_feeds), why)
            self._last = self.multi.compile(run_feeds)
            return result
        compiled = self._compile(run_feeds)   # the lock is held
        why = compiled.needs_values
        if why is None:
            return run(compiled, run_feeds, compute=False)
        return computed(run(compiled, run_feeds, workers=self._workers), why)

    def decode(self, prompt: Sequence[int], steps: int) -> Decoded:
        """A decode loop on a decoder exported with its KV cache: the prompt step, then
        ``steps`` tokens, the cache kept on the device from step to step (``api/decode.py``)."""
        return decode(self, prompt, steps)

    @property
    def inputs(self) -> list[TensorInfo]:
        """The graph's inputs as declared (name, dtype, shape with symbolic dims), as
        onnxruntime's ``get_inputs()`` gives them."""
        return [tensor_info(n, self.graph.values[n].type) for n in self.graph.inputs]

    @property
    def outputs(self) -> list[TensorInfo]:
        """The graph's outputs as declared, in order (onnxruntime's ``get_outputs()``)."""
        return [tensor_info(n, self.graph.values[n].type) for n in self.graph.outputs]

    def get_inputs(self) -> list[TensorInfo]:
        return self.inputs

    def get_outputs(self) -> list[TensorInfo]:
        return self.outputs

    def save_graph(self, path: str | PathLike, feeds: Mapping[str, Any] | None = None) -> Path:
        """Write the compiled graph (lowered and fused, one node per kernel task, each with
        its stream) as ONNX to look at, for ``feeds``' shapes (None: the last compiled, else
        the declared ones); card 0's plan on several cards (``api/lowered.py``)."""
        return save_lowered(self.compile(feeds) if feeds is not None else self.compiled, Path(path))

    def __repr__(self) -> str:
        spread = getattr(getattr(self.multi, "cluster", None), "spread", None)
        cards = "" if spread is None else f", devices={spread.devices}, parallel={spread.parallel!r}"
        return (f"Session({self.graph.source!r}, device={self.profile.name!r}, streams={self.options.streams!r}"
                f"{cards}, inputs=[{', '.join(map(str, self.inputs))}], "
                f"outputs=[{', '.join(map(str, self.outputs))}])")

    @property
    def memory_plan(self) -> MemoryPlan:
        """The memory plan of the most recently compiled signature."""
        return self.compiled.memory_plan

    @property
    def compiled(self) -> Compiled:
        if self._last is None:
            self.compile(None)
        assert self._last is not None
        return self._last


def _check_max_plans(n: int | None) -> int | None:
    if n is not None and (isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1):
        raise GraphExecError(f"max_plans must be an int >= 1 or None, not {n!r}")
    return None if n is None else int(n)


def _check_threads(threads: int) -> int:
    if isinstance(threads, bool) or not isinstance(threads, (int, np.integer)) or threads < 1:
        raise GraphExecError(f"threads must be an int >= 1, not {threads!r}")
    return int(threads)


def _check_streams(streams: int | str, profile: DeviceProfile) -> int | str:
    if streams == "auto":
        return streams
    if isinstance(streams, bool) or not isinstance(streams, (int, np.integer)):
        raise GraphExecError(f"streams must be an int >= 1 or 'auto', not {streams!r}")
    if streams < 1:
        raise GraphExecError(f"streams must be >= 1, got {streams}")
    if streams > profile.max_streams:
        raise GraphExecError(f"streams={streams} exceeds the {profile.max_streams} streams "
                             f"device {profile.name} allows")
    return int(streams)


def _switches(path: str | None) -> frozenset[str]:
    """The fusion rules an ATC switch file turns off (none without one)."""
    return frozenset() if path is None else read_switch_file(path)


def _numerics(value: str) -> str:
    if value not in NUMERICS:
        raise GraphExecError(f"precision_numerics must be 'model' or 'device', not {value!r}")
    return value
