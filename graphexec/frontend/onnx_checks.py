"""Checks an ONNX model must pass before it becomes IR: external data, nesting, declared dims.

Each raises ModelLoadError with one line naming the file and the tensor, node or value.
"""

from __future__ import annotations

import math
import stat
import warnings
from pathlib import Path
from typing import Iterator, Sequence

import onnx
from onnx import external_data_helper as ext

from graphexec._files import inside
from graphexec._limits import over_budget
from graphexec.errors import ModelLoadError
from graphexec.frontend.attr_rules import attr_problem, schema_facts

# protobuf parses at most 100 nested messages, and each level of If/Loop/Scan costs three
# (node, attribute, graph), so no file nests subgraphs more than ~32 deep; 24 leaves room
# for the ModelProto that shape inference and the reference fallback wrap around a graph.
MAX_SUBGRAPH_DEPTH = 24


def load_external_data(model: onnx.ModelProto, folder: Path, where: str) -> list[Path]:
    """Read every tensor's external data from files in ``folder``, or name the one that fails;
    returns the files read (no output may replace them)."""
    files: list[Path] = []
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
        path = inside(folder, location)
        if path is None:  # as onnx: no reading outside the folder
            raise ModelLoadError(f"{where}: tensor {tensor.name!r}: external data file {location!r} "
                                 f"is outside the model's folder {folder}")
        if not path.is_file():
            raise ModelLoadError(f"{where}: tensor {tensor.name!r}: external data file {location!r} "
                                 f"{_not_a_file(path)} in {folder}")
        check_initializer_dims(tensor, where)
        problem = over_budget(_declared_bytes(tensor))
        if problem:
            raise ModelLoadError(f"{where}: tensor {tensor.name!r}: its dims declare {list(tensor.dims)}, "
                                 f"which {problem}; the external data is not read")
        files.append(path)
        try:
            ext.load_external_data_for_tensor(tensor, str(folder))
        except (OSError, ValueError, onnx.checker.ValidationError) as e:
            raise ModelLoadError(f"{where}: tensor {tensor.name!r}: cannot read external data "
                                 f"from {location!r}: {e}") from None
    return files


def _not_a_file(path: Path) -> str:
    """Why ``path`` is no regular file: it is missing, or which other kind of thing it is (a FIFO
    would block the reader for ever, a device could be endless)."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return "does not exist"
    kinds = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISDIR, "a folder"), (stat.S_ISCHR, "a character device"),
             (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))
    return "is " + next((what for test, what in kinds if test(mode)), "not a regular file") + ", not a regular file"


def check_initializer_dims(tensor: onnx.TensorProto, where: str) -> None:
    """An initializer's dims are sizes: numpy would read a -1 as 'whatever fits'."""
    for i, d in enumerate(tensor.dims):
        if d < 0:
            raise ModelLoadError(f"{where}: initializer {tensor.name!r} declares dim {i} as {d}; "
                                 "an initializer's dims must be >= 0")


def _declared_bytes(tensor: onnx.TensorProto) -> int:
    """What the tensor's dims and data type make, before any of its data is read."""
    try:
        itemsize = onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type).itemsize
    except (KeyError, ValueError, TypeError):
        itemsize = 1  # an unknown type is reported where the tensor is decoded
    return math.prod(tensor.dims) * max(itemsize, 1)


def check_no_external_data(model: onnx.ModelProto, where: str,
                           attributes: list[list[onnx.AttributeProto]] | None = None) -> None:
    """A model given as bytes or a proto has no folder to find external data in.
    ``attributes``: the main graph's nodes' attributes, node by node, read already."""
    tensors = ext._get_all_tensors(model) if attributes is None else _all_tensors(model, attributes)
    for tensor in tensors:
        if ext.uses_external_data(tensor):
            raise ModelLoadError(f"{where}: tensor {tensor.name!r} keeps its data in an external file; "
                                 "load the model from its path so the file can be found")


def _all_tensors(model: onnx.ModelProto, attributes: list[list[onnx.AttributeProto]]) -> Iterator[onnx.TensorProto]:
    """``ext._get_all_tensors(model)``, in its order, with the main graph's attributes given."""
    yield from model.graph.initializer
    for attrs in attributes:
        for a in attrs:
            yield from ext._recursive_attribute_processor(a, ext._get_initializer_tensors_from_graph)
    for attrs in attributes:
        for a in attrs:
            if a.HasField("t"):
                yield a.t
            yield from a.tensors
            yield from ext._recursive_attribute_processor(a, ext._get_attribute_tensors_from_graph)
    for function in model.functions:
        yield from ext._get_attribute_tensors_from_graph(function)


def subgraph_depth(node: onnx.NodeProto) -> int:
    """How many levels of subgraphs ``node`` holds (0 for a plain node), without recursion."""
    deepest, stack = 0, [(node, 0)]
    while stack:
        n, depth = stack.pop()
        deepest = max(deepest, depth)
        if depth > MAX_SUBGRAPH_DEPTH:
            break  # deep enough to refuse; do not walk a hostile tree to its end
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                stack.extend((inner, depth + 1) for inner in a.g.node)
            elif a.type == onnx.AttributeProto.GRAPHS:
                stack.extend((inner, depth + 1) for g in a.graphs for inner in g.node)
    return deepest


def check_depth(node: onnx.NodeProto, name: str, where: str = "") -> None:
    """Refuse a node whose subgraphs nest deeper than MAX_SUBGRAPH_DEPTH."""
    if subgraph_depth(node) > MAX_SUBGRAPH_DEPTH:
        raise ModelLoadError(f"{where + ': ' if where else ''}node {name} ({node.op_type}) "
                             f"nests subgraphs more than {MAX_SUBGRAPH_DEPTH} "
                             f"levels deep; graphexec supports at most {MAX_SUBGRAPH_DEPTH}")


Fields = tuple[onnx.NodeProto, str, str, str, list[str], list[str], list[onnx.AttributeProto]]


def fields_of(n: onnx.NodeProto) -> Fields:
    """(node, name, op_type, domain, inputs, outputs, attributes) as the proto gives them,
    each read once: every read of a protobuf field makes a new wrapper object, and the
    checks and the IR node read the same fields of every node (five times over, at load)."""
    return n, n.name, n.op_type, n.domain, list(n.input), list(n.output), list(n.attribute)


def check_text(model: onnx.ModelProto, where: str, fields: list[Fields] | None = None) -> None:
    """Names must be text: protobuf hands over a name that is not valid UTF-8 as bytes.
    ``fields``: the main graph's nodes as ``fields_of`` read them."""
    def bad(what: str, value: object) -> ModelLoadError:
        return ModelLoadError(f"{where}: not a valid ONNX file: {what} {value!r} is not UTF-8 text")

    for o in model.opset_import:
        if not isinstance(o.domain, str):
            raise bad("opset domain", o.domain)
    for p in model.metadata_props:
        if not isinstance(p.key, str) or not isinstance(p.value, str):
            raise bad("metadata entry", p.key)
    graphs, rows = [model.graph], fields
    while graphs:  # depth was checked first, so this list stays small
        g = graphs.pop()
        if not isinstance(g.name, str):
            raise bad("graph name", g.name)
        for vi in (*g.input, *g.output, *g.value_info, *g.initializer):
            if not isinstance(vi.name, str):
                raise bad("value name", vi.name)
        for _, name, op, domain, ins, outs, attrs in (map(fields_of, g.node) if rows is None else rows):
            try:   # str + bytes raises: one C call per field list instead of an isinstance per name
                name + op + domain + "".join(ins) + "".join(outs) + "".join([a.name for a in attrs])
            except TypeError:
                for text in (name, op, domain, *ins, *outs):
                    if not isinstance(text, str):
                        raise bad(f"a field of node {name!r}", text) from None
                for a in attrs:
                    if not isinstance(a.name, str):
                        raise bad(f"an attribute name of node {name!r}", a.name) from None
            graphs.extend(sub for a in attrs for sub in ([a.g] if a.HasField("g") else list(a.graphs)))
        rows = None


def schema_problem(node: onnx.NodeProto, opsets: dict[str, int]) -> str | None:
    """What the op's schema forbids in ``node`` (input/output count, a required input left out,
    an attribute of the wrong type), or None; ops without a schema are the kernels' business."""
    return fields_problem(node.op_type, node.domain, node.input, node.output, node.attribute, opsets)


def fields_problem(op: str, domain: str, inputs: Sequence[str], outputs: Sequence[str],
                   attributes: Sequence[onnx.AttributeProto], opsets: dict[str, int]) -> str | None:
    """``schema_problem`` of a node's fields (``fields_of``)."""
    domain = "" if domain == "ai.onnx" else domain
    facts = schema_facts(op, domain, opsets.get(domain, 1))
    if facts is None:
        return None
    for what, names, (low, high) in (("inputs", inputs, facts.inputs), ("outputs", outputs, facts.outputs)):
        if not low <= len(names) <= high:
            span = f"{low}" if low == high else f"{low} to {high}" if high < 2**31 - 1 else f"at least {low}"
            return f"has {len(names)} {what}; {op}-{facts.since} takes {span}"
    for i, formal in facts.required:
        if i < len(inputs) and not inputs[i]:
            return f"leaves out input {i} ({formal!r}), which {op} requires"
    return attr_problem(op, facts, attributes, outputs)


def subgraph_problem(node: onnx.NodeProto, opsets: dict[str, int]) -> str | None:
    """``fields_problem`` of every node in ``node``'s subgraphs (If branches, Loop and Scan
    bodies), at any depth, as 'in NODE's ATTRIBUTE: node NAME (OP) ...'; or None."""
    stack = [(node.name or node.op_type, a) for a in node.attribute]
    while stack:   # depth was checked first, so this walk stays small
        outer, a = stack.pop()
        for g in [a.g] if a.type == onnx.AttributeProto.GRAPH else a.graphs:
            for i, n in enumerate(g.node):
                problem = fields_problem(n.op_type, n.domain, n.input, n.output, n.attribute, opsets)
                if problem:
                    return f"in {outer}'s {a.name}: node {n.name or f'{n.op_type}_{i}'} ({n.op_type}) {problem}"
                stack.extend((n.name or n.op_type, inner) for inner in n.attribute)
    return None


def check_dims(vi: onnx.ValueInfoProto, what: str, where: str) -> None:
    """A declared dim must be >= 0, or -1: Paddle2ONNX writes -1 for a dynamic dim, and
    onnxruntime reads it as a symbolic one (so does ``tensor_type``)."""
    if vi.type.WhichOneof("value") != "tensor_type" or not vi.type.tensor_type.HasField("shape"):
        return
    for i, d in enumerate(vi.type.tensor_type.shape.dim):
        if d.HasField("dim_value") and d.dim_value < -1:
            raise ModelLoadError(f"{where}: {what} {vi.name!r} declares dim {i} as {d.dim_value}; "
                                 "dims must be >= 0 (or -1 for a dynamic one)")


def parse_failure(where: str, error: Exception) -> ModelLoadError:
    """The error for bytes protobuf cannot parse, in plain words."""
    text = str(error)
    if "MaxDepth" in text or "recursion" in text.lower():
        return ModelLoadError(f"{where}: not a valid ONNX file: its messages nest deeper than protobuf parses "
                              f"(subgraphs may nest at most {MAX_SUBGRAPH_DEPTH} levels)")
    reason = text.rsplit(": ", 1)[-1] if ": " in text else text
    return ModelLoadError(f"{where}: not a valid ONNX file (protobuf cannot parse it: {reason or 'corrupt data'})")
