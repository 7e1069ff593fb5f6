"""The parallel modes by name: an explicit registry, and how a session starts one.

Every mode is imported here by name (no module is found by building its name at run
time); ``REGISTRY`` is what ``Session(parallel=...)``, ``parallel="auto"`` and the command
line see. A test may take a mode out of it or put another in.
"""

from __future__ import annotations

from typing import Any, Callable

from graphexec.cluster.auto import AutoParallel
from graphexec.cluster.data import DataParallel
from graphexec.cluster.pipeline import PipelineParallel
from graphexec.cluster.spread import MODES, Cluster, Mode, Spread, spread_of, system_for
from graphexec.cluster.tensor import TensorParallel
from graphexec.errors import GraphExecError
from graphexec.ir import Graph
from graphexec.plan import CompileOptions
from graphexec.runtime.profiles import DeviceProfile

REGISTRY: dict[str, Callable[[Cluster], Mode]] = {
    "data": DataParallel,
    "pipeline": PipelineParallel,
    "tensor": TensorParallel,
    "auto": lambda cluster: AutoParallel(cluster, REGISTRY),   # tries the others, as registered at the time
}


def mode_class(name: Any) -> Callable[[Cluster], Mode]:
    """The registered mode ``name``."""
    if not isinstance(name, str) or name not in MODES:
        raise GraphExecError(f"parallel must be one of {', '.join(map(repr, MODES))}, not {name!r}")
    if name not in REGISTRY:
        raise GraphExecError(f"parallel={name!r} is not implemented yet (implemented: {', '.join(implemented())})")
    return REGISTRY[name]


def implemented() -> list[str]:
    """The modes that exist now, in MODES order."""
    return [m for m in MODES if m in REGISTRY]


def check_spread(devices: Any, parallel: Any, microbatches: Any, system: Any, profile: DeviceProfile,
                 device_given: bool) -> Spread | None:
    """Check the multi-device options and the mode's name; None for one device."""
    spread = spread_of(devices, parallel, microbatches, system, profile, device_given)
    mode_class(parallel)
    return spread


def start(spread: Spread, graph: Graph, options: CompileOptions) -> Mode:
    """The mode a multi-device session hands its compiles and runs to."""
    return mode_class(spread.parallel)(Cluster(graph, options, spread))


def one_card(graph: Graph, options: CompileOptions, profile: DeviceProfile, system: Any, device_given: bool
             ) -> Mode:
    """A "data" run on one card of the system, through the launches the multi-card modes
    make (inputs copied in and outputs out on the card's copy stream, inside its
    makespan): the baseline a comparison by cards measures them against, like with like."""
    return start(Spread(system_for(system, profile, device_given), 1, "data", 1), graph, options)
