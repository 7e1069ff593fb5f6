"""Which files a loaded graph was read from, kept beside the graph rather than in it.

An output may not replace a file its command reads (a YAML graph's .npz, an ONNX file's
external data); the CLI and ``convert`` ask here. It is no annotation of the graph, so it
stays out of ``Graph.meta`` (which round-trips through YAML and ONNX) and is forgotten
with the graph.
"""

from __future__ import annotations

import os
import weakref

from graphexec.ir import Graph

_READ: weakref.WeakKeyDictionary[Graph, list[str]] = weakref.WeakKeyDictionary()


def record(graph: Graph, path: str | os.PathLike[str]) -> None:
    """Note that building ``graph`` read ``path``."""
    files = _READ.setdefault(graph, [])
    if str(path) not in files:
        files.append(str(path))


def files_read(graph: Graph) -> list[str]:
    """The files read to build ``graph`` (beyond its own file), in the order they were read."""
    return list(_READ.get(graph, ()))
