"""Compile options: part of a compiled plan's cache key together with the input shapes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from graphexec.plan.measured import MeasuredTimes

STREAM_POLICIES = ("single", "ge", "chains", "list")
MEMORY_MODES = ("reuse", "none", "joint")
LAUNCH_MODES = ("graph", "host")


@dataclass(frozen=True)
class CompileOptions:
    """How to compile a graph.

    Attributes:
        streams: the stream limit (an int >= 1) or "auto" (search 1, 2, 4, 8).
        policy: a stream policy (see ``passes/stream_policies.py``), "auto", "manual"
            (a YAML graph's own schedule) or None (single for one stream, else the fastest of
            ge, chains and list at that limit by a timing-only simulation, as "auto" picks:
            never worse than GE's own rule).
        memory: "reuse", "none" or "joint" (see ``passes/memory_planning.py``).
        fold: fold constant subgraphs at compile time.
        check_hazards: the device records byte ranges and reports unsynchronized accesses.
        launch: "graph" (the task list is loaded with the model) or "host" (every task
            is launched from the host at the profile's launch cost).
        threads: host threads for the kernels' math (more than one adds a thread plan).
        input_types: the feeds' types this compile is for (name -> TensorType).
        external: inputs that live in an enclosing plan's memory (the outer-scope names
            a control-flow body reads): the memory plan leaves them out.
        fusion: graph and UB fusion as GE/ATC does it (``passes/graph_fusion.py``); it
            applies in graph mode only (host launch runs every op as its own kernel).
        fusion_off: the fusion rules turned off, by GE's names (``passes/fusion_switch.py``,
            as ATC's ``--fusion_switch_file`` turns them off).
        precision_mode: ATC's ``--precision_mode`` the tasks are timed in
            (``passes/precision.py``); None: the chip's default (force_fp16 on Ascend).
        precision_numerics: "model" (outputs as the ONNX model defines them) or "device"
            (the mode's lower-precision operands and results, to see its accuracy cost).
        measured: measured op durations (an op_summary, a kernel trace) that time the tasks
            they match instead of the cost model (``passes/measured.py``); None: the cost model.
    """

    streams: int | str = 1
    policy: str | None = None
    memory: str = "reuse"
    fold: bool = True
    check_hazards: bool = False
    launch: str = "graph"
    threads: int = 1
    input_types: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    external: frozenset[str] = frozenset()
    fusion: bool = True
    fusion_off: frozenset[str] = frozenset()
    precision_mode: str | None = None
    precision_numerics: str = "model"
    measured: MeasuredTimes | None = None

    @property
    def graph_mode(self) -> bool:
        return self.launch == "graph"

    @property
    def fusing(self) -> bool:
        """Whether graph fusion runs: on, and the graph is compiled for graph mode."""
        return self.fusion and self.graph_mode

    @property
    def stream_policy(self) -> str:
        """The policy to run: the one asked for, else the default for the stream limit."""
        if self.policy is not None:
            return self.policy
        return "single" if self.streams == 1 else "auto"
