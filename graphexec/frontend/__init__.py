"""Frontends: ONNX files and protos, YAML execution graphs and the Python builder to the IR."""

from __future__ import annotations

import os
from typing import Any

from onnx import ModelProto  # not `import onnx`: the submodule .onnx would shadow it

from graphexec.errors import ModelLoadError
from graphexec.ir import Graph


def load(src: Any) -> Graph:
    """Load a graph from a .onnx or .yaml/.yml path, bytes, an onnx.ModelProto, a GraphBuilder or a Graph.

    Raises:
        ModelLoadError: the file is missing, unreadable or not a valid graph.
    """
    from graphexec.frontend.builder import GraphBuilder
    from graphexec.frontend.onnx import load_onnx

    if isinstance(src, Graph):
        return src
    if isinstance(src, GraphBuilder):
        return src.build()
    if isinstance(src, (ModelProto, bytes, bytearray)):
        return load_onnx(src)
    if isinstance(src, (str, os.PathLike)):
        path = os.fspath(src)
        if path.endswith((".yaml", ".yml")):
            from graphexec.frontend.yaml import load_yaml

            return load_yaml(path)
        return load_onnx(path)
    raise ModelLoadError(f"cannot load a graph from a {type(src).__name__}")
