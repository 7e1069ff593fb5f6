"""graphexec's own annotations inside ONNX files, so an ONNX round trip loses nothing.

Per node, ``stream_label`` and ``priority`` go to the node's ``metadata_props``; per
graph, the hand-written schedule, the options and the description go to the model's
``metadata_props`` as JSON. Other tools ignore them.
"""

from __future__ import annotations

import json

import onnx

from graphexec.errors import ModelLoadError
from graphexec.ir import Graph

PREFIX = "graphexec."
NODE_KEYS = ("stream_label", "priority")
GRAPH_KEYS = ("schedule", "options", "description")


def write_meta(graph: Graph, model: onnx.ModelProto) -> None:
    """Store the node and graph annotations of ``graph`` in ``model`` (nodes in the same order)."""
    for node, proto in zip(graph.nodes, model.graph.node):
        kept = [p for p in proto.metadata_props if not p.key.startswith(PREFIX)]
        del proto.metadata_props[:]
        proto.metadata_props.extend(kept)
        for key in NODE_KEYS:
            if key in node.meta:
                proto.metadata_props.add(key=PREFIX + key, value=json.dumps(node.meta[key]))
    for key in GRAPH_KEYS:
        if key in graph.meta:
            model.metadata_props.add(key=PREFIX + key, value=json.dumps(graph.meta[key], sort_keys=True))


def read_meta(model: onnx.ModelProto, graph: Graph) -> None:
    """Restore what :func:`write_meta` stored; nodes are matched through their protos."""
    try:
        for node in graph.nodes:
            for p in node.proto.metadata_props if node.proto is not None else ():
                key = p.key.removeprefix(PREFIX)
                if p.key.startswith(PREFIX) and key in NODE_KEYS:
                    node.meta[key] = json.loads(p.value)
        for p in model.metadata_props:
            key = p.key.removeprefix(PREFIX)
            if p.key.startswith(PREFIX) and key in GRAPH_KEYS:
                graph.meta[key] = json.loads(p.value)
    except json.JSONDecodeError as e:
        raise ModelLoadError(f"{graph.source}: graphexec metadata is not valid JSON: {e}") from None
