"""SequenceMap lowered at load to the Loop its ONNX function body is: a Loop over the first
sequence's length whose body takes element i of each sequence input (SequenceAt), runs the
map's body on it and appends each result to a carried sequence (SequenceInsert). The Loop is
then lowered into device tasks like any Loop that carries sequences
(``passes/control_flow.py``), so the map's body runs as tasks, once per element, and its
simulated time grows with the sequence's length, where the whole map was one reference task.

Which inputs are sequences is read from their declared types, else from onnx's type inference
of the model, else from the op that makes them; a map whose input types cannot be told, or
whose body does not declare its outputs' element types, stays as it is (reference fallback).
"""

from __future__ import annotations

import onnx
from onnx import TensorProto
from onnx import helper as h

from graphexec._files import ASIDE_MIN_NODES, interruptible
from graphexec.ir.onnx_proto import all_nodes, has_nodes, subgraphs

_SEQUENCE_OPS = {"SequenceEmpty", "SequenceConstruct", "SequenceInsert", "SequenceErase", "SplitToSequence",
                 "SequenceMap"}


def lower_sequence_maps(model: onnx.ModelProto) -> bool:
    """Replace every SequenceMap of ``model`` (subgraphs included) by its Loop, in place; True
    if there was one. Called after the nesting depth is checked: the walks here recurse."""
    if not any(n.op_type == "SequenceMap" and n.domain in ("", "ai.onnx") for n in all_nodes(model.graph.node)):
        return False
    kinds = _declared_kinds(model)
    _lower_graph(model.graph, kinds)
    return True


def _declared_kinds(model: onnx.ModelProto) -> dict[str, str]:
    """Each typed name's kind (tensor_type, sequence_type, ...), from the file and onnx's inference."""
    kinds: dict[str, str] = {}

    def add(g: onnx.GraphProto) -> None:
        for vi in [*g.input, *g.output, *g.value_info]:
            if vi.type.WhichOneof("value"):
                kinds.setdefault(vi.name, vi.type.WhichOneof("value") or "")
        for n in g.node:
            for sub in subgraphs(n):
                add(sub)

    add(model.graph)
    try:
        add(interruptible(lambda: onnx.shape_inference.infer_shapes(model),
                          big=has_nodes(model.graph, ASIDE_MIN_NODES)).graph)
    except Exception:  # noqa: BLE001 - inference is a help here; the producer ops decide otherwise
        pass
    return kinds


def _lower_graph(g: onnx.GraphProto, kinds: dict[str, str]) -> None:
    made_by = {o: n.op_type for n in g.node for o in n.output}
    out: list[onnx.NodeProto] = []
    for k, n in enumerate(g.node):
        for sub in subgraphs(n):
            _lower_graph(sub, kinds)
        lowered_nodes = lowered(n, k, kinds, made_by) if n.op_type == "SequenceMap" and n.domain in ("", "ai.onnx") \
            else None
        out.extend(lowered_nodes or [n])
    del g.node[:]
    g.node.extend(out)


def _is_sequence(name: str, kinds: dict[str, str], made_by: dict[str, str]) -> bool | None:
    if name in kinds:
        return kinds[name] == "sequence_type"
    return True if made_by.get(name) in _SEQUENCE_OPS else None


def lowered(n: onnx.NodeProto, k: int, kinds: dict[str, str], made_by: dict[str, str]) -> list | None:
    """The nodes that replace the SequenceMap ``n`` (the k-th of its graph), or None to keep it."""
    body = next((a.g for a in n.attribute if a.name == "body"), None)
    seq = [_is_sequence(x, kinds, made_by) for x in n.input]
    elems = [o.type.tensor_type.elem_type for o in body.output] if body is not None else []
    if body is None or None in seq or not seq[0] or not all(elems) or len(body.input) != len(n.input):
        return None
    p = f"{n.name or 'SequenceMap'}__seqmap{k}/"
    m = len(n.output)
    steps = [h.make_node("SequenceLength", [n.input[0]], [p + "len"], name=p + "len")]
    steps += [h.make_node("SequenceEmpty", [], [p + f"empty{j}"], name=p + f"empty{j}", dtype=elems[j])
              for j in range(m)]
    take = [h.make_node("SequenceAt" if s else "Identity", [x, p + "i"] if s else [x], [b.name], name=p + f"take{j}")
            for j, (x, s, b) in enumerate(zip(n.input, seq, body.input))]
    put = [h.make_node("SequenceInsert", [p + f"acc{j}", o.name], [p + f"acc{j}_next"], name=p + f"put{j}")
           for j, o in enumerate(body.output)]
    loop_body = h.make_graph(
        [*take, *body.node, *put, h.make_node("Identity", [p + "cond"], [p + "cond_next"], name=p + "cond")],
        f"{body.name or 'body'}_loop",
        [h.make_tensor_value_info(p + "i", TensorProto.INT64, []),
         h.make_tensor_value_info(p + "cond", TensorProto.BOOL, []),
         *(h.make_tensor_sequence_value_info(p + f"acc{j}", elems[j], None) for j in range(m))],
        [h.make_tensor_value_info(p + "cond_next", TensorProto.BOOL, []),
         *(h.make_tensor_sequence_value_info(p + f"acc{j}_next", elems[j], None) for j in range(m))],
        initializer=list(body.initializer), value_info=list(body.value_info))
    loop = h.make_node("Loop", [p + "len", "", *(p + f"empty{j}" for j in range(m))], list(n.output),
                       name=n.name or p + "loop", body=loop_body)
    return [*steps, loop]
