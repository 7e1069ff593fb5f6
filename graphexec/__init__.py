"""graphexec: lower compute graphs onto an emulated NPU runtime and run them.

Example:
    >>> import graphexec as gx
    >>> graph = gx.load("models/inception_block.onnx")
    >>> result = gx.Session(graph, streams=1, device="ascend910").run(gx.default_feeds(graph))
    >>> result.stats.makespan_us
"""

from graphexec import sweep  # the package, which called is graphexec.sweep.run.sweep
from graphexec.api import Comparison, Session, compare
from graphexec.api.inspect import Inspection, TensorInfo, inspect
from graphexec.engine.device_tensor import DeviceTensor
from graphexec.engine.feeds import default_feeds
from graphexec.engine.result import Result, Stats
from graphexec.errors import (
    AclError,
    DeviceError,
    FeedError,
    GraphError,
    GraphExecError,
    KernelError,
    ModelLoadError,
    OutOfMemoryError,
    PassError,
    UnsupportedOpError,
)
from graphexec.frontend import load
from graphexec.frontend.builder import GraphBuilder
from graphexec.ir import Graph
from graphexec.kernels.custom import kernel
from graphexec.profiling.env import from_environment as _profiling_from_environment

__all__ = [
    "AclError", "Comparison", "DeviceError", "DeviceTensor", "FeedError", "Graph", "GraphBuilder", "GraphError",
    "GraphExecError", "Inspection", "KernelError", "ModelLoadError", "OutOfMemoryError", "PassError", "Result",
    "Session", "Stats", "TensorInfo", "UnsupportedOpError", "compare", "default_feeds", "inspect", "kernel", "load",
    "sweep",
]
__version__ = "0.1.0"
_profiling_from_environment()   # ASCEND_PROFILING_ENABLED=1: every run of the program is profiled
