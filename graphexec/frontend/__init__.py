"""Frontends: ONNX files and protos (YAML and the builder come next) to the IR."""

from __future__ import annotations

import os
from typing import Any

from onnx import ModelProto  # not `import onnx`: the submodule .onnx would shadow it

from graphexec.errors import ModelLoadError
from graphexec.ir import Graph


def load(src: Any) -> Graph:
    """Load a graph from a .onnx path, bytes, an onnx.ModelProto, or a Graph.

    Raises:
        ModelLoadError: the file is missing, unreadable or not a valid graph.
    """
    from graphexec.frontend.onnx import load_onnx

    if isinstance(src, Graph):
        return src
    if isinstance(src, (ModelProto, bytes, bytearray)):
        return load_onnx(src)
    if isinstance(src, (str, os.PathLike)):
        path = os.fspath(src)
        if path.endswith((".yaml", ".yml")):
            raise ModelLoadError(f"{path}: YAML graphs are not supported yet")
        return load_onnx(path)
    raise ModelLoadError(f"cannot load a graph from a {type(src).__name__}")
