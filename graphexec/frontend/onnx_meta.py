"""graphexec's own annotations inside ONNX files, so an ONNX round trip loses nothing.

Per node, ``stream_label`` and ``priority`` go to the node's ``metadata_props``; per
graph, the hand-written schedule, the options and the description go to the model's
``metadata_props`` as JSON. Other tools ignore them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import onnx

from graphexec.errors import ModelLoadError
from graphexec.frontend.options import meta_node, meta_options, meta_schedule
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


def read_meta(model: onnx.ModelProto, graph: Graph, base: Path | None = None) -> None:
    """Restore what :func:`write_meta` stored; nodes are matched through their protos.

    Every value goes through the YAML format's models (``options``): a wrong type, an
    unknown field or a priority past 7 is refused as a YAML file's would be; ``base`` is
    the model's folder, where a device profile it names must be.
    """
    where = graph.source
    for node in graph.nodes:
        for p in node.proto.metadata_props if node.proto is not None else ():
            key = p.key.removeprefix(PREFIX)
            if p.key.startswith(PREFIX) and key in NODE_KEYS:
                node.meta[key] = meta_node(key, _json(p.key, p.value, where), str(node), where)
    for p in model.metadata_props:
        key = p.key.removeprefix(PREFIX)
        if not p.key.startswith(PREFIX) or key not in GRAPH_KEYS:
            continue
        value = _json(p.key, p.value, where)
        if key == "options":
            graph.meta[key] = meta_options(value, base, where)
        elif key == "schedule":
            graph.meta[key] = meta_schedule(value, where)
        elif not isinstance(value, str):
            raise ModelLoadError(f"{where}: metadata {p.key}: must be a string, not {type(value).__name__}")
        else:
            graph.meta[key] = value


def _json(key: str, text: str, where: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ModelLoadError(f"{where}: graphexec metadata is not valid JSON: {e}") from None
    except RecursionError:  # json's C parser stops at its recursion limit
        raise ModelLoadError(f"{where}: metadata {key}: nests deeper than Python's JSON parser goes") from None


def check_meta_schedule(graph: Graph) -> None:
    """The schedule an ONNX file carries, checked as a YAML file's is (unknown nodes, events
    never recorded, deadlocks, uncovered dependencies); the first problem is the error."""
    from graphexec.frontend.yaml_checks import data_deps
    from graphexec.frontend.yaml_schedule import NodeRef, check_schedule

    if "schedule" not in graph.meta:
        return
    nodes = [NodeRef(n.name, n.meta.get("stream_label"), ("nodes", i)) for i, n in enumerate(graph.nodes)]
    problems = check_schedule(graph.meta["schedule"], nodes, data_deps(graph))
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise ModelLoadError(f"{graph.source}: metadata {PREFIX}schedule: {problems[0][1]}{more}")
