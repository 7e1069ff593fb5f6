"""One error hierarchy for graphexec.

Every error a user can cause is a ``GraphExecError`` whose message is one line that
names the file, node or value at fault and what is wrong with it. The CLI turns these
into exit code 2; anything else is an internal error (exit 1).
"""

from __future__ import annotations


class GraphExecError(Exception):
    """Base of every error graphexec raises on purpose."""

    def __init__(self, message: str) -> None:
        # Keep messages to one line: the CLI prints them as they are.
        super().__init__(" ".join(str(message).split()))


class ModelLoadError(GraphExecError):
    """A model file or object could not be read or is not a valid graph."""


class GraphValidationError(ModelLoadError):
    """A YAML graph has problems; ``problems`` keeps each one with its file, line and column."""

    def __init__(self, message: str, problems: list | None = None) -> None:
        self.problems = list(problems or [])
        super().__init__(message)


class ExportError(GraphExecError):
    """A graph holds something the format it is written to cannot express."""


class OutputError(GraphExecError):
    """An output file or folder cannot be written where it was asked for."""


class GraphError(GraphExecError):
    """The graph is structurally wrong: a cycle, a dangling input, a duplicate name."""


class FeedError(GraphExecError):
    """The inputs given to ``Session.run`` do not match the graph."""


class UnsupportedOpError(GraphExecError):
    """No own kernel and no fallback knows an op."""


class KernelError(GraphExecError):
    """A kernel failed while computing a node."""


class PassError(GraphExecError):
    """A compiler pass refused the graph; the message says which pass and why."""


class DeviceError(GraphExecError):
    """A device profile or device option is wrong."""


class CalibrationError(GraphExecError):
    """A measurement table is malformed, or it cannot pin the parameters asked to be fitted."""


class HcclError(GraphExecError):
    """A collective-communication error, with the HcclResult code and name.

    Attributes:
        code: the numeric HcclResult, e.g. 1 (HCCL_E_PARA).
        name: the symbolic name, e.g. ``HCCL_E_PARA``.
    """

    def __init__(self, code: int, name: str, message: str) -> None:
        self.code = code
        self.name = name
        super().__init__(f"{name} ({code}): {message}")


class AclError(GraphExecError):
    """An error of the emulated runtime, with the ACL error code and name.

    Attributes:
        code: the numeric ACL error code, e.g. 207001.
        name: the symbolic name, e.g. ``ACL_ERROR_RT_MEMORY_ALLOCATION``.
    """

    def __init__(self, code: int, name: str, message: str) -> None:
        self.code = code
        self.name = name
        super().__init__(f"{name} ({code}): {message}")


class OutOfMemoryError(AclError):
    """The device pool or HBM cannot hold a requested allocation."""

    def __init__(self, message: str) -> None:
        super().__init__(207001, "ACL_ERROR_RT_MEMORY_ALLOCATION", message)


class InvariantError(AssertionError):
    """A pass broke its own contract (``requires``/``ensures``): an internal bug, never bad
    input, so it is outside the ``GraphExecError`` family and the CLI exits 1 on it."""
