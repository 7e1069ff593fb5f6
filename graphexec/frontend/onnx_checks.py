"""Checks an ONNX model must pass before it becomes IR: external data, nesting, declared dims.

Each raises ModelLoadError with one line naming the file and the tensor, node or value.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import onnx
from onnx import external_data_helper as ext

from graphexec.errors import ModelLoadError

# protobuf parses at most 100 nested messages, and each level of If/Loop/Scan costs three
# (node, attribute, graph), so no file nests subgraphs more than ~32 deep; 24 leaves room
# for the ModelProto that shape inference and the reference fallback wrap around a graph.
MAX_SUBGRAPH_DEPTH = 24


def load_external_data(model: onnx.ModelProto, folder: Path, where: str) -> None:
    """Read every tensor's external data from files in ``folder``, or name the one that fails."""
    for tensor in ext._get_all_tensors(model):
        if not ext.uses_external_data(tensor):
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                location = ext.ExternalDataInfo(tensor).location
        except ValueError as e:
            raise ModelLoadError(f"{where}: tensor {tensor.name!r}: bad external data entry: {e}") from None
        if not location:
            raise ModelLoadError(f"{where}: tensor {tensor.name!r} uses external data but names no file")
        path = folder / location
        if not path.resolve().is_relative_to(folder.resolve()):  # as onnx: no reading outside the folder
            raise ModelLoadError(f"{where}: tensor {tensor.name!r}: external data file {location!r} "
                                 f"is outside the model's folder {folder}")
        if not path.is_file():
            raise ModelLoadError(f"{where}: tensor {tensor.name!r}: external data file {location!r} "
                                 f"does not exist in {folder}")
        try:
            ext.load_external_data_for_tensor(tensor, str(folder))
        except (OSError, ValueError, onnx.checker.ValidationError) as e:
            raise ModelLoadError(f"{where}: tensor {tensor.name!r}: cannot read external data "
                                 f"from {location!r}: {e}") from None


def check_no_external_data(model: onnx.ModelProto, where: str) -> None:
    """A model given as bytes or a proto has no folder to find external data in."""
    for tensor in ext._get_all_tensors(model):
        if ext.uses_external_data(tensor):
            raise ModelLoadError(f"{where}: tensor {tensor.name!r} keeps its data in an external file; "
                                 "load the model from its path so the file can be found")


def subgraph_depth(node: onnx.NodeProto) -> int:
    """How many levels of subgraphs ``node`` holds (0 for a plain node), without recursion."""
    deepest, stack = 0, [(node, 0)]
    while stack:
        n, depth = stack.pop()
        deepest = max(deepest, depth)
        if depth > MAX_SUBGRAPH_DEPTH:
            break  # deep enough to refuse; do not walk a hostile tree to its end
        for a in n.attribute:
            graphs = [a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)
            stack.extend((inner, depth + 1) for g in graphs for inner in g.node)
    return deepest


def check_depth(node: onnx.NodeProto, name: str, where: str = "") -> None:
    """Refuse a node whose subgraphs nest deeper than MAX_SUBGRAPH_DEPTH."""
    if subgraph_depth(node) > MAX_SUBGRAPH_DEPTH:
        raise ModelLoadError(f"{where + ': ' if where else ''}node {name} ({node.op_type}) nests subgraphs more than {MAX_SUBGRAPH_DEPTH} "
                             f"levels deep; graphexec supports at most {MAX_SUBGRAPH_DEPTH}")


def check_dims(vi: onnx.ValueInfoProto, what: str, where: str) -> None:
    """A declared dim must be >= 0 (an unknown dim is left out, not negative)."""
    if vi.type.WhichOneof("value") != "tensor_type" or not vi.type.tensor_type.HasField("shape"):
        return
    for i, d in enumerate(vi.type.tensor_type.shape.dim):
        if d.HasField("dim_value") and d.dim_value < 0:
            raise ModelLoadError(f"{where}: {what} {vi.name!r} declares dim {i} as {d.dim_value}; dims must be >= 0")


def parse_failure(where: str, error: Exception) -> ModelLoadError:
    """The error for bytes protobuf cannot parse, in plain words."""
    text = str(error)
    if "MaxDepth" in text or "recursion" in text.lower():
        return ModelLoadError(f"{where}: not a valid ONNX file: its messages nest deeper than protobuf parses "
                              f"(subgraphs may nest at most {MAX_SUBGRAPH_DEPTH} levels)")
    reason = text.rsplit(": ", 1)[-1] if ": " in text else text
    return ModelLoadError(f"{where}: not a valid ONNX file (protobuf cannot parse it: {reason or 'corrupt data'})")
