"""ONNX frontend: ModelProto (or a file) to the IR.

Structure only: shapes are bound and inferred per input signature by the session's
shape pass, so one loaded graph serves every batch size.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import onnx
from google.protobuf.message import DecodeError
from onnx import helper, numpy_helper
from onnx.external_data_helper import uses_external_data

from graphexec._limits import check_file_size, gc_paused
from graphexec.errors import ModelLoadError
from graphexec.frontend.attrs import decode_attrs
from graphexec.frontend.const_rules import known_values_problem
from graphexec.frontend.onnx_checks import (
    Fields,
    check_depth,
    check_dims,
    check_initializer_dims,
    check_no_external_data,
    check_text,
    fields_of,
    fields_problem,
    load_external_data,
    parse_failure,
    subgraph_problem,
)
from graphexec.frontend.onnx_functions import inline_functions
from graphexec.frontend.onnx_meta import check_meta_schedule, read_meta
from graphexec.frontend.onnx_stream import raw_bytes, split_weights
from graphexec.frontend.provenance import record
from graphexec.frontend.sequence_map import lower_sequence_maps
from graphexec.ir import Graph, Node, TensorType, Value, topological_sort, verify
from graphexec.ir.onnx_proto import tensor_type

_UNTYPED = TensorType()   # a node output's type until inference (types are frozen: one serves all)
STREAM_MIN_BYTES = 32 << 20   # smaller files parse whole as fast as they split (measured: 23 MB)
_T = onnx.TensorProto
# element types whose raw bytes to_array unpacks (strings ignore raw_data)
_PACKED = frozenset({_T.UNDEFINED, _T.STRING, _T.INT4, _T.UINT4, _T.FLOAT4E2M1, _T.INT2, _T.UINT2,
                     _T.FLOAT6E2M3, _T.FLOAT6E3M2})


def read_model(path: str | os.PathLike[str]) -> onnx.ModelProto:
    """Read an ONNX file with its external data, or raise ModelLoadError naming it."""
    return read_model_files(path)[0]


def read_model_files(path: str | os.PathLike[str]) -> tuple[onnx.ModelProto, list[Path]]:
    """:func:`read_model`, and the external data files it read."""
    p = _readable(path)
    model = parse_model(_read(p), str(p))
    return model, load_external_data(model, p.parent, str(p))


def read_model_weights(path: str | os.PathLike[str]) -> tuple[onnx.ModelProto, dict[int, np.ndarray], list[Path]]:
    """:func:`read_model_files` for loading: a file of STREAM_MIN_BYTES or more, at least half
    of it initializers' ``raw_data``, comes with those apart, read straight into arrays
    (``onnx_stream.py``), by initializer index; :func:`from_onnx` takes them as ``raws``."""
    p = _readable(path)
    split, size = None, p.stat().st_size
    if size >= STREAM_MIN_BYTES:
        try:
            with p.open("rb") as f:
                weights = raw_bytes(f, size)
                if weights is not None and 2 * weights >= size:   # mostly raw weights: worth splitting
                    f.seek(0)
                    split = split_weights(f, size)
        except OSError as e:
            raise ModelLoadError(f"{p}: cannot read: {e.strerror or e}") from None
    data, raws = split if split is not None else (_read(p), {})
    model = parse_model(data, str(p))
    return model, raws, load_external_data(model, p.parent, str(p))


def _readable(path: str | os.PathLike[str]) -> Path:
    """``path`` as a regular file within the host budget, or ModelLoadError saying why not."""
    p = Path(path)
    if not p.exists():
        raise ModelLoadError(f"{p}: no such file")
    if p.is_dir():
        raise ModelLoadError(f"{p}: is a directory, not an ONNX file")
    if not p.is_file():  # a device or a pipe (/dev/zero) would be read forever
        raise ModelLoadError(f"{p}: not a regular file")
    check_file_size(p, "ONNX")
    return p


def _read(p: Path) -> bytes:
    try:
        data = p.read_bytes()
    except OSError as e:
        raise ModelLoadError(f"{p}: cannot read: {e.strerror or e}") from None
    if not data:
        raise ModelLoadError(f"{p}: the file is empty")
    return data


def parse_model(data: bytes, where: str = "<bytes>") -> onnx.ModelProto:
    """Parse serialized ONNX, rejecting what protobuf would silently accept."""
    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except (DecodeError, RuntimeError, ValueError) as e:
        raise parse_failure(where, e) from None
    if not model.HasField("graph") or model.ir_version <= 0:
        raise ModelLoadError(f"{where}: not an ONNX model (no graph or no ir_version)")
    return model


def free_names(g: onnx.GraphProto) -> set[str]:
    """Names a subgraph (recursively) reads from its enclosing scopes."""
    defined = {i.name for i in g.input} | {i.name for i in g.initializer}
    defined |= {i.values.name for i in g.sparse_initializer}
    free: set[str] = set()
    for n in g.node:
        for name in n.input:
            if name and name not in defined:
                free.add(name)
        for a in n.attribute:
            for sub in _graphs_of(a):
                free |= free_names(sub) - defined
        defined.update(o for o in n.output if o)
    free |= {o.name for o in g.output if o.name not in defined}
    return free


def _graphs_of(a: onnx.AttributeProto) -> list[onnx.GraphProto]:
    if a.type == onnx.AttributeProto.GRAPH:
        return [a.g]
    if a.type == onnx.AttributeProto.GRAPHS:
        return list(a.graphs)
    return []


def _constant_value(node: onnx.NodeProto) -> np.ndarray | None:
    """The value of a Constant node, or None if it needs the fallback (sparse)."""
    for a in node.attribute:
        if a.name == "value":
            return numpy_helper.to_array(a.t)
        simple = {"value_float": np.float32, "value_int": np.int64, "value_floats": np.float32,
                  "value_ints": np.int64}
        if a.name in simple:
            return np.array(onnx.helper.get_attribute_value(a), dtype=simple[a.name])
        if a.name in ("value_string", "value_strings"):
            v = onnx.helper.get_attribute_value(a)
            v = [s.decode() for s in v] if isinstance(v, list) else v.decode()
            return np.array(v, dtype=object)
    return None


def node_from_proto(i: int, n: onnx.NodeProto, depth_checked: bool = False) -> Node:
    """The IR node of a NodeProto (the i-th of its graph, for a default name);
    ``depth_checked``: the caller has run ``check_depth`` on it already."""
    if not depth_checked:
        check_depth(n, n.name or f"{n.op_type}_{i}")
    return _node(i, fields_of(n))


def _node(i: int, fields: Fields) -> Node:
    """The IR node of a NodeProto's fields (``fields_of``), its depth checked."""
    n, given, op, domain, inputs, outputs, attrs = fields
    implicit: set[str] = set()
    for a in attrs:
        for sub in _graphs_of(a):
            implicit |= free_names(sub)
    return Node(given or f"{op}_{i}", op, inputs, outputs, decode_attrs(n, attrs),
                "" if domain == "ai.onnx" else domain, sorted(implicit - set(inputs)) if implicit else [], n)


def check_opsets(model: onnx.ModelProto, where: str) -> dict[str, int]:
    """Opset per domain; a default-domain opset newer than onnx knows is an error."""
    opsets = {("" if o.domain == "ai.onnx" else o.domain): o.version for o in model.opset_import}
    newest = onnx.defs.onnx_opset_version()
    if opsets.get("", 0) > newest:
        raise ModelLoadError(f"{where}: opset {opsets['']} is newer than the installed onnx knows ({newest})")
    opsets.setdefault("", newest)
    return opsets


def from_onnx(model: onnx.ModelProto, source: str = "<model>", base: Path | None = None,
              raws: Mapping[int, np.ndarray] | None = None) -> Graph:
    """Build the IR from a ModelProto: constants folded in, nodes sorted, verified.

    ``base`` is the model file's folder (None for bytes or a proto): paths in its
    metadata must stay inside it. ``raws``: initializers' ``raw_data`` read apart
    (:func:`read_model_weights`), by initializer index. Model-local functions are inlined
    into ``model`` first (``onnx_functions.py``): the caller hands over a model it owns.
    """
    inline_functions(model, source)
    g = model.graph
    nodes = [fields_of(n) for n in g.node]   # each field read once (see fields_of)
    for i, (n, name, op, *_, attrs) in enumerate(nodes):  # first: the walks below recurse into subgraphs
        if attrs:   # a node without attributes holds no subgraph
            check_depth(n, name or f"{op}_{i}", source)
    if lower_sequence_maps(model):
        nodes = [fields_of(n) for n in g.node]
    check_text(model, source, nodes)
    check_no_external_data(model, source, [f[-1] for f in nodes])
    for vi in g.input:
        check_dims(vi, "input", source)
    graph = Graph(g.name or Path(source).stem, source=source, opsets=check_opsets(model, source),
                  functions=list(model.functions))
    for i, init in enumerate(g.initializer):
        check_initializer_dims(init, source)
        arr = _initializer(init, raws.get(i) if raws else None, source)
        graph.values[init.name] = Value(init.name, TensorType(arr.dtype, arr.shape), arr)
    if len(g.sparse_initializer):
        raise ModelLoadError(f"{source}: sparse initializers are not supported; densify them first")
    for vi in g.input:
        if vi.name in graph.values:  # old-style graphs list initializers as inputs too
            continue
        graph.inputs.append(vi.name)
        graph.values[vi.name] = Value(vi.name, _declared(vi, source))
    values = graph.values
    for i, f in enumerate(nodes):
        n, given, op, domain, inputs, outputs, attrs = f
        if op == "Constant" and domain in ("", "ai.onnx") and len(outputs) == 1:
            try:
                value = _constant_value(n)
            except (ValueError, TypeError, KeyError) as e:
                raise ModelLoadError(f"{source}: node {given or i} (Constant): its value is malformed: {e}") from None
            if value is not None:
                values[outputs[0]] = Value(outputs[0], TensorType(value.dtype, value.shape), value)
                continue
        problem = fields_problem(op, domain, inputs, outputs, attrs, graph.opsets)
        if problem:
            raise ModelLoadError(f"{source}: node {given or f'{op}_{i}'} ({op}) {problem}")
        problem = subgraph_problem(n, graph.opsets) if attrs else None
        if problem:
            raise ModelLoadError(f"{source}: {problem}")
        try:
            graph.nodes.append(_node(i, f))
        except ModelLoadError as e:  # an attribute that cannot be decoded
            raise ModelLoadError(f"{source}: {e}") from None
        for o in outputs:
            if o and o not in values:
                values[o] = Value(o, _UNTYPED)
    for node in graph.nodes:   # every constant is known now
        problem = known_values_problem(node, values)
        if problem:
            raise ModelLoadError(f"{source}: node {node} {problem}")
    for vi in list(g.value_info) + list(g.output):
        v = graph.value(vi.name)
        if v.const is None and vi.type.WhichOneof("value"):
            v.type = _declared(vi, source)
    graph.outputs = [o.name for o in g.output]
    read_meta(model, graph, base)
    _check_names(graph, source)
    topological_sort(graph)
    verify(graph)
    check_meta_schedule(graph)
    return graph


def _initializer(init: onnx.TensorProto, raw: np.ndarray | None, where: str) -> np.ndarray:
    """The initializer's array, as ``numpy_helper.to_array`` makes it (a read-only view of
    its raw bytes where it has them); ``raw`` is its ``raw_data`` read apart."""
    try:
        if raw is not None:
            if init.data_type in _PACKED or init.HasField("segment") or uses_external_data(init) \
                    or sys.byteorder != "little":
                init.raw_data = raw.tobytes()   # what to_array unpacks or swaps itself
            else:
                arr = np.frombuffer(raw, helper.tensor_dtype_to_np_dtype(init.data_type)).reshape(init.dims)
                arr.flags.writeable = False
                return arr
        return numpy_helper.to_array(init)
    except KeyError:
        raise ModelLoadError(f"{where}: initializer {init.name!r} has data type {init.data_type}, "
                             "which onnx does not know") from None
    except (ValueError, TypeError) as e:
        raise ModelLoadError(f"{where}: initializer {init.name!r} is malformed: {e}") from None


def _declared(vi: onnx.ValueInfoProto, where: str) -> TensorType:
    try:
        return tensor_type(vi.type)
    except ModelLoadError as e:
        raise ModelLoadError(f"{where}: value {vi.name!r}: {e}") from None


def _check_names(graph: Graph, where: str) -> None:
    seen: set[str] = set()
    for o in graph.outputs:
        if o in seen:
            raise ModelLoadError(f"{where}: graph output {o!r} is listed twice")
        seen.add(o)


def load_onnx(src: Any) -> Graph:
    """Load a path, bytes or ModelProto as a Graph."""
    with gc_paused():   # a large graph is many small objects: collections would rescan them all
        return _load_onnx(src)


def _load_onnx(src: Any) -> Graph:
    if isinstance(src, onnx.ModelProto):
        if src.functions:   # inlining rewrites the model: not the caller's
            src = _copy(src)
        return from_onnx(src, src.graph.name or "<model>")
    if isinstance(src, (bytes, bytearray)):
        return from_onnx(parse_model(bytes(src)), "<bytes>")
    model, raws, files = read_model_weights(src)
    graph = from_onnx(model, str(src), Path(src).parent, raws)
    for f in files:  # what the model read: outputs may not replace them
        record(graph, f)
    return graph


def _copy(model: onnx.ModelProto) -> onnx.ModelProto:
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    return copy
