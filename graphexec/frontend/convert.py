"""Any loaded graph back to a file: YAML (with a .npz beside it for big constants) or ONNX.

Both keep what the runtime needs bit for bit (constants, attributes, types, node
order and names) and graphexec's annotations (stream labels, priorities, schedule,
options), so YAML -> IR -> ONNX -> IR -> YAML gives the same results.

Example:
    >>> save(gx.load("models/inception_block.onnx"), "inception_block.yaml")
"""

from __future__ import annotations

import base64
import copy
import os
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import yaml

from graphexec._files import Writer, check_output, check_targets, write_atomic, write_one
from graphexec.errors import ExportError
from graphexec.frontend.onnx_meta import write_meta
from graphexec.frontend.provenance import files_read
from graphexec.frontend.yaml_source import reads_as
from graphexec.frontend.yaml_tensors import dtype_name, encode_attr, tensor_entry
from graphexec.ir import Graph, Node, TensorType
from graphexec.ir.onnx_proto import to_onnx, value_info

INLINE_MAX = 64  # constants with more elements go to the .npz beside the YAML file


def onnx_model(graph: Graph) -> onnx.ModelProto:
    """The graph as an ONNX model: custom ops in their domains, annotations as metadata."""
    for node in graph.nodes:  # a builder graph may use a custom domain it never declared
        if node.domain and node.domain not in graph.opsets:
            graph.opsets[node.domain] = 1
    model = to_onnx(graph, containers=True)
    known = set(graph.inputs) | set(graph.outputs) | set(graph.constants)
    model.graph.value_info.extend(value_info(n, v.type) for n, v in graph.values.items()
                                  if n not in known and (v.type.dtype is not None or v.type.shape is not None)
                                  and v.type.kind == "tensor")
    write_meta(graph, model)
    return model


def yaml_data(graph: Graph, weights: str | None = None) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The YAML document of ``graph`` and the arrays that go to the ``weights`` .npz file.

    With ``weights`` None every constant is written inline.
    """
    arrays: dict[str, np.ndarray] = {}
    doc: dict[str, Any] = {"version": 1, "name": graph.name}
    if graph.meta.get("description"):
        doc["description"] = graph.meta["description"]
    doc["opset"] = graph.opsets.get("", onnx.defs.onnx_opset_version())
    if any(d for d in graph.opsets):
        doc["opsets"] = {d: v for d, v in sorted(graph.opsets.items()) if d}
    doc["inputs"], doc["outputs"] = list(graph.inputs), list(graph.outputs)
    doc["tensors"] = _tensors(graph, weights, arrays)
    doc["nodes"] = [_node(n) for n in graph.nodes]
    if "schedule" in graph.meta:
        doc["schedule"] = _schedule(graph.meta["schedule"])
    if graph.meta.get("options"):
        doc["options"] = dict(graph.meta["options"])
    if graph.functions:
        doc["onnx_functions"] = [base64.b64encode(f.SerializeToString()).decode() for f in graph.functions]
    return doc, arrays


def _tensors(graph: Graph, weights: str | None, arrays: dict[str, np.ndarray]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    consts = [n for n, v in graph.values.items() if v.const is not None]
    for name in dict.fromkeys(graph.inputs + consts + list(graph.values)):  # inputs, constants, the rest
        v = graph.values[name]
        try:
            if v.const is not None:
                arr = np.asarray(v.const)
                inline = weights is None or arr.size <= INLINE_MAX or arr.dtype == object
                out[name] = tensor_entry(arr, inline, weights)  # the .npz key is the tensor name
                if not inline:
                    arrays[name] = arr
            elif name in graph.inputs or _known(v.type):
                out[name] = _type_entry(name, v.type)
        except ValueError as e:
            raise ExportError(f"{graph.source}: tensor {name!r} cannot be written to YAML: {e}") from None
    return out


def _known(t: TensorType) -> bool:
    return t.dtype is not None or t.shape is not None if t.kind == "tensor" else t.elem is not None


def _type_entry(name: str, t: TensorType) -> dict[str, Any]:
    if t.kind != "tensor":
        return {"kind": t.kind, **({"type": t.elem} if t.elem else {})}
    entry: dict[str, Any] = {}
    if t.dtype is not None:
        entry["dtype"] = dtype_name(t.dtype)
    if t.shape is not None:
        entry["shape"] = [d if d is None or isinstance(d, str) else int(d) for d in t.shape]
    return entry


def _node(node: Node) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": node.name, "op": node.op}
    if node.domain:
        entry["domain"] = node.domain
    entry["inputs"], entry["outputs"] = list(node.inputs), list(node.outputs)
    types = {a.name: a.type for a in node.proto.attribute} if node.proto is not None else {}
    if node.attrs:
        try:
            entry["attributes"] = {k: encode_attr(v, types.get(k)) for k, v in node.attrs.items() if v is not None}
        except ValueError as e:
            raise ExportError(f"node {node}: cannot be written to YAML: {e}") from None
    for key in ("stream_label", "priority"):
        if key in node.meta:
            entry[key] = node.meta[key]
    return entry


def _schedule(schedule: dict[str, Any]) -> dict[str, Any]:
    streams = []
    for s in schedule["streams"]:
        tasks = [t["run"] if "run" in t else dict(t) for t in s["tasks"]]
        streams.append({"name": s["name"], **({"priority": s["priority"]} if s.get("priority") is not None else {}),
                        "tasks": tasks})
    return {"streams": streams, "synchronize": list(schedule.get("synchronize") or [])}


class _Dumper(yaml.SafeDumper):
    """SafeDumper that quotes every string graphexec's loader would read as something else."""


def _string(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
    """A string scalar, quoted when the loader (YAML 1.2 exponent floats included: ``1e3``,
    ``2e-3``, which PyYAML's dumper leaves bare) would resolve it to a number, bool or null."""
    str_tag = "tag:yaml.org,2002:str"
    # the emitter quotes what PyYAML's own resolver reads otherwise; the rest is ours to quote
    ours = reads_as(text) != str_tag and dumper.resolve(yaml.ScalarNode, text, (True, False)) == str_tag
    return dumper.represent_scalar(str_tag, text, style="'" if ours else None)


_Dumper.add_representer(str, _string)


def yaml_text(doc: dict[str, Any]) -> str:
    """The YAML text of a document from :func:`yaml_data` (leaf lists in flow style); every name
    reads back as the string it is."""
    return yaml.dump(doc, Dumper=_Dumper, sort_keys=False, default_flow_style=None, width=120, allow_unicode=True)


def save(graph: Graph, path: str | os.PathLike[str]) -> list[Path]:
    """Write ``graph`` to ``path`` (.yaml/.yml or .onnx); returns the files written.

    Each file is written under a temporary name and renamed only once all are written
    (the .npz before the YAML), so a failure leaves no partial file and the YAML never
    names a missing or stale .npz.
    """
    p = Path(path)
    if p.suffix not in (".onnx", ".yaml", ".yml"):
        raise ExportError(f"{p}: can write .yaml, .yml or .onnx, not {p.suffix or 'a file without a suffix'}")
    check_output(p)
    sources = [("the graph being converted", graph.source)] if Path(graph.source).is_file() else []
    sources += [("a file the graph was read from", f) for f in files_read(graph)]
    graph = _device_relative_to(graph, p.absolute().parent)
    if p.suffix == ".onnx":
        check_targets([("", p, ())], sources)
        model = onnx_model(graph)
        write_one(p, lambda tmp: onnx.save(model, str(tmp)))
        return [p]
    doc, arrays = yaml_data(graph, p.with_suffix(".npz").name)
    check_targets([("", p, ())] + ([("", p.with_suffix(".npz"), ())] if arrays else []), sources)
    outputs: list[tuple[Path, Writer]] = [(p.with_suffix(".npz"), lambda tmp: _savez(tmp, arrays))] if arrays else []
    outputs.append((p, lambda tmp: tmp.write_text(yaml_text(doc), encoding="utf-8")))  # renamed last
    write_atomic(outputs)
    return [p] + [out for out, _ in outputs[:-1]]


def _device_relative_to(graph: Graph, folder: Path) -> Graph:
    """The graph with its device profile path (absolute once loaded) written relative to ``folder``,
    where the written file is: a model names its files relative to itself."""
    device = graph.meta.get("options", {}).get("device")
    if not device or not os.path.isabs(device):
        return graph
    out = copy.copy(graph)
    out.meta = {**graph.meta, "options": {**graph.meta["options"], "device": os.path.relpath(device, folder)}}
    return out


def _savez(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """An .npz as np.savez writes it, one ``NAME.npy`` member per tensor; written here since
    np.savez takes the names as keywords (a tensor called "file" or "allow_pickle" would
    fill its own parameters)."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED, allowZip64=True) as z:
        for name, a in arrays.items():
            with z.open(f"{name}.npy", "w", force_zip64=True) as member:
                np.lib.format.write_array(member, np.asanyarray(a), allow_pickle=False)
