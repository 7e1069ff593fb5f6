"""Kernels: one small numpy function per op, in a registry, plus the onnx fallback.

Importing this package registers every own kernel.
"""

from graphexec.kernels import registry
from graphexec.kernels.registry import OpContext, Unsupported, lookup, register

from graphexec.kernels import conv, elementwise, nn, norm, pool, reduce, resize, selection, tensor  # noqa: F401,E402  (register kernels)

__all__ = ["OpContext", "Unsupported", "lookup", "register", "registry"]
