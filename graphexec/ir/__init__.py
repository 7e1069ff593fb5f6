"""The graph IR: dataclasses, verification, printing."""

from graphexec.ir.graph import Graph, Node, TensorType, Value
from graphexec.ir.verify import topological_sort, verify

__all__ = ["Graph", "Node", "TensorType", "Value", "topological_sort", "verify"]
